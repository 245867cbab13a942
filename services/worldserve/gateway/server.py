"""Compose the gateway: ``build_gateway(settings)`` is the one composition root.

``python -m worldserve.gateway.server`` runs it until SIGTERM/SIGINT, then stops accepting RPCs
and gives in-flight ones ``grace_period_s`` to finish (match the pod's termination grace period).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from worldserve.backends.base import Backend
from worldserve.backends.checkpoint import load_chat_template, load_context_tokens
from worldserve.backends.openai import OpenAIBackend
from worldserve.backends.prompt_limit import PromptLimit, load_tokenizer
from worldserve.backends.replicas import ReplicaSet
from worldserve.backends.triton import TritonBackend
from worldserve.db.directory import DatabaseDirectory, Directory, StaticDirectory
from worldserve.db.repository import Repository, create_engine
from worldserve.domains import modelcard
from worldserve.gateway.admin_servicer import AdminServicer
from worldserve.gateway.interceptors import (
    AuthInterceptor,
    ErrorInterceptor,
    ObservabilityInterceptor,
)
from worldserve.gateway.servicer import SimulatorServicer
from worldserve.gateway.simulator import Simulator
from worldserve.observability import logs, metrics, tracing
from worldserve.quota.counters import RedisQuota
from worldserve.quota.limits import TenantLimits
from worldserve.quota.rate import RefusalPacer
from worldserve.routing.choice import Entry
from worldserve.routing.router import RegistryRouter, Router, StaticRouter
from worldserve.sessions.limits import MAX_MESSAGE_BYTES
from worldserve.sessions.store import RedisSessionStore, SessionStore
from worldserve.settings import Settings
from worldserve.tenancy.keys import Principal
from worldserve.v1 import admin_pb2, admin_pb2_grpc, simulator_pb2, simulator_pb2_grpc

log = logging.getLogger(__name__)

SERVICE = simulator_pb2.DESCRIPTOR.services_by_name["Simulator"].full_name
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name


@dataclass
class Gateway:
    server: grpc.aio.Server
    port: int
    store: SessionStore
    router: Router
    health: health.aio.HealthServicer
    repo: Repository | None = None
    simulator: Simulator | None = None
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    async def start(self) -> None:
        await self.router.start()
        await self._update_health()  # health answers for the service from the first RPC on
        await self.server.start()
        self._tasks.append(asyncio.create_task(self._watch_health()))
        if self.simulator is not None:  # in-flight reservations live while this gateway does
            sim = self.simulator
            self._tasks.append(asyncio.create_task(
                sim.quota.keep_alive(sim.settings.reservation_lease_s)))

    async def stop(self, grace: float) -> None:
        for task in self._tasks:
            task.cancel()
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.router.aclose()
        if self.repo is not None:
            await self.repo.aclose()
        aclose = getattr(self.store, "aclose", None)
        if aclose is not None:
            await aclose()

    async def _update_health(self) -> None:
        store_ok = backend_ok = False
        with contextlib.suppress(Exception):
            store_ok = await self.store.ping()
        with contextlib.suppress(Exception):
            backend_ok = await self.router.ready()
        metrics.STORE_UP.set(int(store_ok))
        metrics.BACKEND_UP.set(int(backend_ok))
        ok = store_ok and backend_ok
        status = (health_pb2.HealthCheckResponse.SERVING if ok
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.health.set(SERVICE, status)

    async def _watch_health(self, period_s: float = 5.0) -> None:
        while True:
            await asyncio.sleep(period_s)
            await self._update_health()


def backend_of(protocol: str, model: str, endpoint: str, replicas: Sequence[str],
               policy: str = "affinity", load_floor: int = 1) -> Backend:
    """A model server by its protocol (Triton gRPC or OpenAI-compatible): its replicas behind
    one ReplicaSet (affinity, bounded load, failover) when listed, else its one endpoint."""
    def one(url: str) -> Backend:
        if protocol == "openai":
            return OpenAIBackend(url, model)
        return TritonBackend(url, model)

    if replicas:
        return ReplicaSet({url: one(url) for url in replicas},
                          policy=policy, load_floor=load_floor)
    return one(endpoint)


def triton_for_entry(entry: Entry, policy: str = "affinity", load_floor: int = 1) -> Backend:
    """The backend of a registry entry (its protocol): its replicas when listed, else its
    Service endpoint. An OpenAI-compatible server serves the version under its label."""
    model = entry.label if entry.protocol == "openai" else entry.triton_model
    return backend_of(entry.protocol, model, entry.endpoint, entry.replicas, policy, load_floor)


def single_backend(settings: Settings) -> Backend:
    """The model server(s) of a deployment without the registry: Triton or OpenAI-compatible,
    one endpoint or several replicas of it."""
    if settings.backend_protocol == "openai":
        model = settings.openai_model or str(settings.model_dir)
        endpoint, replicas = settings.openai_url, settings.openai_replicas
    else:
        model, endpoint, replicas = (settings.model_name, settings.triton_url,
                                     settings.triton_replicas)
    return backend_of(settings.backend_protocol, model, endpoint, replicas,
                      settings.replica_policy, settings.replica_load_floor)


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS when a certificate is configured; mutual TLS when a client CA is too."""
    if settings.tls_cert_file is None and settings.tls_key_file is None:
        return None
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        raise ValueError("TLS needs both WORLDSERVE_TLS_CERT_FILE and WORLDSERVE_TLS_KEY_FILE")
    ca = settings.tls_client_ca_file.read_bytes() if settings.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())],
        root_certificates=ca, require_client_auth=ca is not None)


def deployment_defaults(settings: Settings) -> TenantLimits:
    """Quotas of a tenant that has none of its own."""
    return TenantLimits(
        max_sessions=settings.max_sessions_per_tenant,
        max_inflight_steps=settings.max_inflight_steps_per_tenant,
        tokens_per_minute=settings.tokens_per_minute_per_tenant,
        monthly_token_budget=settings.monthly_token_budget_per_tenant,
    )


def refusal_pacer(settings: Settings) -> RefusalPacer | None:
    """This replica's pacing of each key's refusals, unless the deployment sets none."""
    if settings.refusals_per_second_per_key is None:
        return None
    return RefusalPacer(settings.refusals_per_second_per_key, settings.refusal_burst_per_key)


def static_directory(settings: Settings) -> StaticDirectory:
    """The dev key (and admin key) from settings, deployment-default quotas; no database."""
    keys = {}
    if settings.dev_api_key:
        keys[settings.dev_api_key] = Principal(settings.dev_tenant, "tenant", "dev")
    if settings.admin_api_key:
        keys[settings.admin_api_key] = Principal(settings.dev_tenant, "admin", "admin")
    return StaticDirectory(keys, deployment_defaults(settings))


def build_gateway(settings: Settings, redis_url: str, store: SessionStore | None = None,
                  backend: Backend | None = None, database_url: str | None = None,
                  directory: Directory | None = None,
                  backend_for: Callable[[Entry], Backend] | None = None) -> Gateway:
    """With ``database_url``, keys and quotas come from PostgreSQL and the Admin API works;
    without it, the dev key from settings is the only tenant (see ``static_directory``)."""
    redis_store = (store if isinstance(store, RedisSessionStore)
                   else RedisSessionStore.from_url(redis_url, settings.key_prefix))
    store = store or redis_store
    quota = RedisQuota(redis_store.client, settings.key_prefix)  # shares the store's pool
    template = load_chat_template(settings.model_dir)
    router: Router
    if settings.use_registry:  # the operator's registry: versions, weights, endpoints
        router = RegistryRouter(redis_store.client, settings.key_prefix,
                                backend_for or partial(triton_for_entry,
                                                       policy=settings.replica_policy,
                                                       load_floor=settings.replica_load_floor),
                                template)
    else:
        backend = backend or single_backend(settings)
        domains = (modelcard.normalize_domains(settings.model_domains)
                   if settings.model_domains else modelcard.read(settings.model_dir).domains)
        context = settings.model_context_tokens or load_context_tokens(settings.model_dir)
        limit = PromptLimit(context, load_tokenizer(settings.model_dir))
        router = StaticRouter(settings.model_version_label, backend, template, domains, limit)
    repo = Repository(create_engine(database_url)) if database_url else None
    if directory is None:
        directory = (DatabaseDirectory(repo, deployment_defaults(settings),
                                       settings.auth_cache_ttl_s, settings.auth_stale_s)
                     if repo is not None else static_directory(settings))
    simulator = Simulator(settings, store, router, directory, quota)
    server = grpc.aio.server(
        interceptors=[ObservabilityInterceptor(), ErrorInterceptor(refusal_pacer(settings)),
                      AuthInterceptor(directory)],
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)],
    )
    simulator_pb2_grpc.add_SimulatorServicer_to_server(SimulatorServicer(simulator), server)
    admin = AdminServicer(repo, router.models, router.domains)
    admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [SERVICE, ADMIN_SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME], server)
    address = f"{settings.gateway_host}:{settings.gateway_port}"
    credentials = server_credentials(settings)
    port = (server.add_secure_port(address, credentials) if credentials is not None
            else server.add_insecure_port(address))
    if port == 0:
        raise OSError(f"cannot bind {settings.gateway_host}:{settings.gateway_port}")
    return Gateway(server, port, store, router, health_servicer, repo, simulator)


async def serve(settings: Settings, redis_url: str, database_url: str | None) -> None:
    gateway = build_gateway(settings, redis_url, database_url=database_url)
    await gateway.start()
    log.info("gateway listening on %s:%d", settings.gateway_host, gateway.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping: in-flight RPCs get %.0fs", settings.grace_period_s)
    await gateway.stop(settings.grace_period_s)


def main() -> None:
    from worldserve.dev.services import resolve_redis_url

    settings = Settings()
    logs.setup(settings.log_format)
    tracing.configure(settings)
    if settings.metrics_port:
        try:
            metrics.serve(settings.metrics_port, settings.metrics_host)
        except OSError as exc:  # serving steps matters more than exporting metrics
            log.error("metrics port %d unavailable: %s", settings.metrics_port, exc)
    redis_url = resolve_redis_url(settings)
    asyncio.run(serve(settings, redis_url, settings.database_url))


if __name__ == "__main__":
    main()
