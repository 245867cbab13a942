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
