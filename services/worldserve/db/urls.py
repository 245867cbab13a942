"""Database URLs as SQLAlchemy wants them (psycopg 3, sync and async share the driver)."""

from __future__ import annotations


def sync_url(url: str) -> str:
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def libpq_url(url: str) -> str:
    """The URL for psycopg itself (no SQLAlchemy driver suffix)."""
    return "postgresql://" + sync_url(url)[len("postgresql+psycopg://"):]
