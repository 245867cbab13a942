"""The project's error tree; each class names its gRPC status code (docs/ARCHITECTURE.md §3).

    WorldserveError
    ├── InvalidArgument      INVALID_ARGUMENT
    ├── Unauthenticated      UNAUTHENTICATED
    ├── PermissionDenied     PERMISSION_DENIED
    ├── NotFound             NOT_FOUND (also for another tenant's session)
    ├── AlreadyExists        ALREADY_EXISTS (a tenant id taken)
    ├── Aborted              ABORTED (expected_turn mismatch)
    ├── FailedPrecondition   FAILED_PRECONDITION (a domain the model does not simulate)
    ├── ResourceExhausted    RESOURCE_EXHAUSTED (+ QuotaFailure, retry delay)
    ├── Unavailable          UNAVAILABLE
    │   ├── BackendUnavailable
    │   ├── StoreUnavailable
    │   ├── DatabaseUnavailable
    │   └── ModelOutputError (no usable observation after one retry)
    └── DeadlineExceeded     DEADLINE_EXCEEDED
"""

from __future__ import annotations

from typing import ClassVar

ECHO_CHARS = 80  # how much of a caller's input an error message repeats
MESSAGE_CHARS = 1024  # the longest message a status carries (metadata stays small)


def echo(value: object) -> str:
    """A caller's input for an error message: cut to ``ECHO_CHARS``, saying its full length."""
    text = str(value)
    if len(text) <= ECHO_CHARS:
        return text
    return f"{text[:ECHO_CHARS]}… ({len(text)} characters)"


def capped(message: str) -> str:
    """``message`` cut to ``MESSAGE_CHARS``: what a status may carry back to the caller."""
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + "…"


class WorldserveError(Exception):
    """Base of every error the platform reports to a caller. ``code_name`` is its gRPC status
    code's name: the gateway's interceptor and the SDK both map through it (one owner)."""

    code_name: ClassVar[str] = "UNKNOWN"
    # A refusal: the request as sent cannot be served, and sending it again at once will not
    # change that (not a conflict to retry, not the server's fault). The gateway paces a key's
    # refusals (quota/rate.py).
    refusal: ClassVar[bool] = False


class InvalidArgument(WorldserveError):
    code_name = "INVALID_ARGUMENT"
    refusal = True


class Unauthenticated(WorldserveError):
    code_name = "UNAUTHENTICATED"


class PermissionDenied(WorldserveError):
    code_name = "PERMISSION_DENIED"
    refusal = True


class NotFound(WorldserveError):
    code_name = "NOT_FOUND"
    refusal = True


class AlreadyExists(WorldserveError):
    code_name = "ALREADY_EXISTS"
    refusal = True


class Aborted(WorldserveError):
    code_name = "ABORTED"


class FailedPrecondition(WorldserveError):
    code_name = "FAILED_PRECONDITION"
    refusal = True


class ResourceExhausted(WorldserveError):
    """Over a quota or limit: ``subject`` names it (QuotaFailure), ``retry_after_s`` says when
    to try again (RetryInfo; 0 = not by waiting)."""

    code_name = "RESOURCE_EXHAUSTED"
    refusal = True

    def __init__(self, message: str, subject: str = "", retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.subject = subject
        self.retry_after_s = retry_after_s


class Unavailable(WorldserveError):
    code_name = "UNAVAILABLE"


class BackendUnavailable(Unavailable):
    pass


class StoreUnavailable(Unavailable):
    pass


class ModelOutputError(Unavailable):
    pass


class DatabaseUnavailable(Unavailable):
    pass


class DeadlineExceeded(WorldserveError):
    code_name = "DEADLINE_EXCEEDED"
