"""`worldserve mcp` and `worldserve openenv`: the front doors for MCP agents and RL frameworks."""

from __future__ import annotations

import typer

from worldserve.cli.sessions import API_KEY, TARGET
from worldserve.settings import Settings


def _settings(target: str, **updates: object) -> Settings:
    settings = Settings()
    if target:
        updates["upstream_gateway"] = target
    return settings.model_copy(update={k: v for k, v in updates.items() if v is not None})


def mcp(stdio: bool = typer.Option(False, "--stdio", help="Serve one session over stdio "
                                   "(desktop agents) instead of Streamable HTTP."),
        session: str = typer.Option("", "--session", help="The session --stdio serves."),
        host: str | None = typer.Option(None, help="Bind address; default WORLDSERVE_MCP_HOST."),
        port: int | None = typer.Option(None, help="Port; default WORLDSERVE_MCP_PORT (8931)."),
        target: str = TARGET, api_key: str = API_KEY) -> None:
    """A simulated MCP server: /sessions/{id}/mcp lists a session's tools and answers calls."""
    from worldserve.frontends.mcp import serve

    if stdio and not session:
        raise typer.BadParameter("--stdio serves one session: give --session ID")
    settings = _settings(target, mcp_host=host, mcp_port=port)
    key = api_key or settings.api_key or settings.dev_api_key or ""
    if stdio and not key:
        raise typer.BadParameter("--stdio needs a tenant key: --api-key or WORLDSERVE_API_KEY")
    serve(settings, stdio_session=session if stdio else "", api_key=key)


def openenv(host: str | None = typer.Option(None, help="Bind address; default "
                                            "WORLDSERVE_OPENENV_HOST."),
            port: int | None = typer.Option(None, help="Port; default WORLDSERVE_OPENENV_PORT "
                                            "(8932)."),
            target: str = TARGET) -> None:
    """An OpenEnv environment server (WebSocket /ws, HTTP /reset /step /state /schema /health):
    each episode is a simulation session; clients send their tenant key as a bearer token."""
    import os
    import sys

    settings = _settings(target, openenv_host=host, openenv_port=port)
    from worldserve.dev.launcher import openenv_interpreter

    python = openenv_interpreter(settings)
    if python is None:
        raise typer.BadParameter("openenv is not installed here: `make install` builds "
                                 ".venv-openenv, or set WORLDSERVE_OPENENV_PYTHON")
    env = dict(os.environ, WORLDSERVE_UPSTREAM_GATEWAY=settings.frontend_upstream_target,
               WORLDSERVE_OPENENV_HOST=settings.openenv_host,
               WORLDSERVE_OPENENV_PORT=str(settings.openenv_port))
    if python == sys.executable:
        from worldserve.frontends.openenv import serve

        serve(settings)
        return
    os.execve(python, [python, "-m", "worldserve.frontends.openenv"], env)
