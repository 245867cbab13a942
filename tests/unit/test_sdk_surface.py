from __future__ import annotations

import worldserve.sdk as sdk


def test_public_surface_is_exactly_what_is_meant() -> None:
    assert set(sdk.__all__) == {
        "Aborted", "AsyncClient", "BatchItem", "BatchStep", "Client", "DeadlineExceeded", "Export",
        "FailedPrecondition", "FaultPolicy", "InternalError", "InvalidArgument",
        "NotFound", "ObservationDelta", "PermissionDenied", "ReasoningDelta",
        "ResourceExhausted", "Restart", "SessionInfo", "StepResult", "StreamEvent", "Turn",
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
        "worldserve.tenancy.records, worldserve.accounting.events, worldserve.domains.faults, "
        "worldserve.domains.trajectory, worldserve.sessions.lineage\n"
        "bad = [m for m in ('grpc', 'redis', 'tritonclient', 'torch', 'sqlalchemy', 'kubernetes',"
        " 'psycopg')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
