from __future__ import annotations

import worldserve.sdk as sdk


def test_public_surface_is_exactly_what_is_meant() -> None:
    assert set(sdk.__all__) == {
        "Aborted", "AsyncClient", "BatchItem", "BatchStep", "Client", "DeadlineExceeded", "Export",
        "FailedPrecondition", "FaultPolicy", "InternalError", "InvalidArgument",
        "NotFound", "ObservationDelta", "PermissionDenied", "ReasoningDelta",
        "ResourceExhausted", "Restart", "SessionInfo", "StepResult", "StreamEvent", "ToolSpec", "Turn",
        "Unauthenticated", "Unavailable", "Unimplemented", "Usage", "WorldserveError", "tls_credentials",
    }
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None


def test_pure_packages_import_no_io_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import worldserve.domains.rendering, worldserve.domains.parsing, "
        "worldserve.domains.chat, worldserve.sessions.rules, worldserve.modelserver.contract, "
        "worldserve.quota.limits, worldserve.quota.lua, worldserve.tenancy.keys, "
        "worldserve.tenancy.records, worldserve.quota.events, worldserve.domains.faults, "
        "worldserve.sessions.trajectory, worldserve.sessions.lineage, worldserve.domains.tools\n"
        "bad = [m for m in ('grpc', 'redis', 'tritonclient', 'torch', 'sqlalchemy', 'kubernetes',"
        " 'psycopg')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_server_and_sdk_map_status_codes_through_the_error_classes() -> None:
    """One owner: every error class names its code; the interceptor answers with it and the SDK
    raises the same class back (ALREADY_EXISTS included, which the SDK once missed)."""
    import grpc

    from worldserve import errors
    from worldserve.gateway.interceptors import status_code
    from worldserve.sdk._convert import translate

    general = errors.WorldserveError.__subclasses__()
    assert {c.code_name for c in general} >= {
        "INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND",
        "ALREADY_EXISTS", "ABORTED", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
        "UNAVAILABLE", "DEADLINE_EXCEEDED"}
    for cls in general:
        if cls.__module__ != "worldserve.errors":
            continue
        err = cls("m") if cls is not errors.ResourceExhausted else cls("m", "s", 1.0)
        code = status_code(err)
        back = translate(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                              "m"))
        assert type(back) is cls, (cls, code, type(back))
    assert status_code(errors.ModelOutputError("x")) == grpc.StatusCode.UNAVAILABLE


def test_sdk_quota_errors_carry_subject_and_retry_delay() -> None:
    import grpc
    from grpc_status import rpc_status

    from worldserve import errors
    from worldserve.gateway.interceptors import rich_status
    from worldserve.sdk._convert import translate

    sent = errors.ResourceExhausted("tenant t reached its in-flight steps quota",
                                    subject="tenant:t:max_inflight_steps", retry_after_s=3)
    status = rpc_status.to_status(rich_status(sent))
    trailing = grpc.aio.Metadata(*status.trailing_metadata)
    got = translate(grpc.aio.AioRpcError(status.code, grpc.aio.Metadata(), trailing,
                                         status.details))
    assert isinstance(got, errors.ResourceExhausted)
    assert got.subject == "tenant:t:max_inflight_steps" and got.retry_after_s == 3.0
    assert str(got) == "tenant t reached its in-flight steps quota"
