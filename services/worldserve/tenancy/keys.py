"""API key format, hashing and comparison (pure: no I/O).

A generated key is ``wsk_<8 public chars>_<43 secret chars>``. PostgreSQL stores only the public
prefix (the first 12 characters, for lookup and display) and the SHA-256 of the whole key; the
secret is shown once. Keys carry 256 random bits, so a fast hash is the right one (a slow
password hash would only slow every authentication); comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

PREFIX_LEN = 12
ROLES = ("tenant", "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who an authenticated key belongs to."""

    tenant: str
    role: str  # tenant | admin
    key_id: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


@dataclass(frozen=True, slots=True)
class NewKey:
    key_id: str
    secret: str  # the whole key, shown once
    prefix: str
    secret_hash: str


def key_prefix(key: str) -> str:
    return key[:PREFIX_LEN]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key).encode(), stored_hash.encode())


def generate_key(secret: str | None = None) -> NewKey:
    """A fresh key, or the record of a given one (the dev key from settings)."""
    if secret is None:
        secret = f"wsk_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    return NewKey(secrets.token_hex(8), secret, key_prefix(secret), hash_key(secret))
