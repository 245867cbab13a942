"""The worldserve Python SDK."""

from worldserve.domains.tools import ToolSpec
from worldserve.errors import (
    Aborted,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    WorldserveError,
)
from worldserve.sdk._convert import InternalError, Unimplemented
from worldserve.sdk.client import AsyncClient, Client, tls_credentials
from worldserve.sdk.types import (
    BatchItem,
    BatchStep,
    Export,
    FaultPolicy,
    ObservationDelta,
    ReasoningDelta,
    Restart,
    SessionInfo,
    StepResult,
    StreamEvent,
    Turn,
    Usage,
)

__all__ = [
    "Aborted",
    "AsyncClient",
    "BatchItem",
    "BatchStep",
    "Client",
    "DeadlineExceeded",
    "Export",
    "FailedPrecondition",
    "FaultPolicy",
    "InternalError",
    "InvalidArgument",
    "NotFound",
    "ObservationDelta",
    "PermissionDenied",
    "ReasoningDelta",
    "ResourceExhausted",
    "Restart",
    "SessionInfo",
    "StepResult",
    "StreamEvent",
    "ToolSpec",
    "Turn",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Usage",
    "WorldserveError",
    "tls_credentials",
]
