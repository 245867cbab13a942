"""The project's error tree. One gateway interceptor maps it to gRPC status codes (docs/ARCHITECTURE.md §3).

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
    """Base of every error the platform reports to a caller."""


class InvalidArgument(WorldserveError):
    pass


class Unauthenticated(WorldserveError):
    pass


class PermissionDenied(WorldserveError):
    pass


class NotFound(WorldserveError):
    pass


class AlreadyExists(WorldserveError):
    pass


class Aborted(WorldserveError):
    pass


class FailedPrecondition(WorldserveError):
    pass


class ResourceExhausted(WorldserveError):
    def __init__(self, message: str, subject: str = "", retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.subject = subject
        self.retry_after_s = retry_after_s


class Unavailable(WorldserveError):
    pass


class BackendUnavailable(Unavailable):
    pass


class StoreUnavailable(Unavailable):
    pass


class ModelOutputError(Unavailable):
    pass


class DatabaseUnavailable(Unavailable):
    pass


class DeadlineExceeded(WorldserveError):
    pass
