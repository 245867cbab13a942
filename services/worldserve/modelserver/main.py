"""Entry point of the model-server process: ``python -m worldserve.modelserver.main``."""

from __future__ import annotations

import logging
import os
import socket
import sysconfig

from worldserve.settings import Settings


def triton_env_fix() -> None:
    """Triton's Python-backend stub links the system libpython; point it at ours (docs/ARCHITECTURE.md §6)."""
    libdir = sysconfig.get_config_var("LIBDIR")
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir and libdir not in current.split(":"):
        os.environ["LD_LIBRARY_PATH"] = f"{libdir}:{current}" if current else libdir


def ports_in_use(host: str, ports: dict[str, int]) -> list[str]:
    """The named ports that something on ``host`` already holds (0 means none asked for)."""
    taken = []
    for name, port in ports.items():
        if not port:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Triton's servers bind
            try:
                s.bind((host, port))
            except OSError:
                taken.append(f"{name}={port}")
    return taken


def serve(settings: Settings) -> None:
    triton_env_fix()
    from pytriton.triton import Triton, TritonConfig

    from worldserve.modelserver.engines import build_engine
    from worldserve.modelserver.triton_model import bind_world_model

    # Every port binds to triton_url's host: 127.0.0.1 under `worldserve up` (nothing outside
    # the machine reaches the model without the gateway), 0.0.0.0 in a model pod.
    host, port = settings.triton_url.rsplit(":", 1)
    host = host.strip("[]") or "127.0.0.1"
    grpc_port = int(port)
    # Triton exits at once on a port in use, but pytriton then waits two minutes for it to
    # answer and says only "timed out": say which port before loading anything.
    taken = ports_in_use(host, {"triton_url": grpc_port,
                                "triton_http_port": settings.triton_http_port,
                                "triton_metrics_port": settings.triton_metrics_port,
                                "engine_metrics_port": settings.engine_metrics_port})
    if taken:
        raise SystemExit(f"model server: port already in use on {host}: {', '.join(taken)}")
    log = logging.getLogger("worldserve.modelserver")
    log.info("loading %s engine from %s", settings.engine, settings.model_dir)
    engine = build_engine(settings.engine, settings.model_dir, settings.device,
                          settings.max_batch_size, settings.batch_wait_ms, settings.torch_threads,
                          settings.prefix_cache_bytes, settings.stream_interval_ms,
                          settings.engine_long_prompt_tokens, settings.engine_long_share)
    if settings.engine_metrics_port:
        from worldserve.modelserver.metrics import serve_engine_metrics

        serve_engine_metrics(engine, settings.engine_metrics_port, host)
    config = TritonConfig(grpc_address=host, grpc_port=grpc_port, http_address=host,
                          http_port=settings.triton_http_port, metrics_address=host,
                          metrics_port=settings.triton_metrics_port, exit_timeout_secs=5)
    try:
        with Triton(config=config) as triton:
            bind_world_model(triton, settings.model_name, engine, settings.default_max_tokens)
            log.info("Triton serving model %r on gRPC %s:%d", settings.model_name, host, grpc_port)
            triton.serve()
    finally:
        engine.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve(Settings())


if __name__ == "__main__":
    main()
