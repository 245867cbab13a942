"""The one settings object of every worldserve process (``WORLDSERVE_*`` environment variables).

Built once in ``main()`` and passed down; nothing else in the code base reads ``os.environ``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL_DIR = REPO_ROOT / "models" / "worldserve-tiny-moe"
# The committed checkpoint as name@version (its model card's name and version; a unit test
# holds the two together).
DEFAULT_MODEL_VERSION = "worldserve-tiny-moe@13"
# The answer length a step may take when its session sets none; the held-out evaluation
# (training/heldout.py) decodes to the same length, so it measures what a step is served.
DEFAULT_MAX_TOKENS = 384


class Settings(BaseSettings):
    """Every knob, with its unit in the name or the description."""

    model_config = SettingsConfigDict(env_prefix="WORLDSERVE_", extra="ignore",
                                      env_parse_none_str="none")  # "none" = no limit

    # --- gateway ---
    gateway_host: str = Field("127.0.0.1", description="Address the gateway binds to.")
    gateway_port: int = Field(50051, description="Gateway gRPC port; 0 picks a free one.")
    grace_period_s: float = Field(
        10.0, description="In-flight RPCs get this long to finish on SIGTERM (pod grace period)."
    )
    tls_cert_file: Path | None = Field(
        None, description="PEM certificate chain of the gateway; set with tls_key_file = TLS."
    )
    tls_key_file: Path | None = Field(None, description="PEM private key of the gateway.")
    tls_client_ca_file: Path | None = Field(
        None, description="PEM CA bundle; when set, clients must present a certificate it "
        "signed (mutual TLS)."
    )
    dev_api_key: str | None = Field(
        None, description="Bearer key of the dev tenant; `worldserve up` generates one if unset."
    )
    dev_tenant: str = Field("dev", description="Tenant id that the dev key authenticates as.")
    admin_api_key: str | None = Field(
        None, description="Admin-role key that `worldserve up` registers; generated if unset."
    )
    api_key: str | None = Field(
        None, description="Key the CLI's client commands send (admin, usage); else the dev key."
    )
    auth_stale_s: float = Field(
        900.0, description="While PostgreSQL is unreachable, key/quota answers this recent are "
        "still served (0 = fail closed at once)."
    )
    auth_cache_ttl_s: float = Field(
        4.0, description="How long a key lookup or quota is cached: a revoked key is refused "
        "within this (+ one query) time."
    )

    # --- state ---
    redis_url: str | None = Field(
        None, description="Redis URL; unset = a server on 127.0.0.1:6379, else a bundled one."
    )
    database_url: str | None = Field(
        None, description="PostgreSQL URL; unset = 127.0.0.1:5432 if it answers, else bundled."
    )
    key_prefix: str = Field("ws", description="Prefix of every Redis key (several stacks, one DB).")
    session_ttl_s: int = Field(3600, description="Default idle time-to-live of a session.")
    max_session_ttl_s: int = Field(7 * 24 * 3600, description="Largest ttl_seconds accepted.")

    # --- limits ---
    max_action_bytes: int = Field(16 * 1024, description="Largest action, in UTF-8 bytes.")
    max_state_bytes: int = Field(64 * 1024, description="Largest initial/current state.")
    max_turns_per_session: int = Field(256, description="Steps beyond this are refused.")
    max_sessions_per_tenant: int = Field(
        1000, description="Default concurrent-session quota (a tenant's quota overrides it)."
    )
    max_inflight_steps_per_tenant: int | None = Field(
        64, description="Default quota of steps running at once per tenant; None = no limit."
    )
    tokens_per_minute_per_tenant: int | None = Field(
        None, description="Default tokens-per-minute quota; None = no limit."
    )
    monthly_token_budget_per_tenant: int | None = Field(
        None, description="Default monthly token budget; None = no limit."
    )
    refusals_per_second_per_key: float | None = Field(
        10.0, gt=0, description="Refusals (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, …) "
        "per second one API key gets from one gateway replica once its burst is spent; faster "
        "ones are held until the rate allows (at most 2 s each). Admin RPCs apart. None = never "
        "held."
    )
    refusal_burst_per_key: int = Field(
        20, ge=1, description="Refusals a key gets without delay before the rate applies."
    )
    reserve_bytes_per_token: float = Field(
        1.0, description="Prompt bytes counted as one token when reserving budget before a step "
        "(1 = an upper bound for byte-level BPE: no undershoot)."
    )
    allowed_domains: list[str] = Field(
        ["MCP", "SEARCH", "TERMINAL", "SWE", "WEB", "OS", "ANDROID"],
        description="Domains this deployment simulates; others get PERMISSION_DENIED.",
    )
    max_tokens_limit: int = Field(4096, description="Largest sampling.max_tokens accepted.")
    max_batch_items: int = Field(64, description="Largest BatchStep (steps × samples).")
    max_import_bytes: int = Field(4 * 1024 * 1024, description="Largest imported trajectory.")
    history_window_turns: int = Field(
        4, description="Turns replayed verbatim in the prompt at least; older ones are summarised."
    )
    session_tail_cache_mib: float = Field(
        64.0, ge=0, description="Memory a gateway gives to the latest turns of the sessions it "
        "committed to, so their next step there reads nothing back (checked in the reservation's "
        "round trip); least recently stepped go first. 0 = off."
    )
    history_window_stride: int = Field(
        4, ge=1, description="The replayed window moves this many turns at a time (1 = slides every "
        "turn). Between moves consecutive prompts share their prefix, so the model server reuses "
        "the previous turn's KV; a prompt shows window .. window+stride-1 turns."
    )

    # --- accounting worker ---
    usage_batch_size: int = Field(2000, description="Usage events read and inserted per batch.")
    usage_block_ms: int = Field(1000, description="How long one stream read waits for events.")
    usage_claim_idle_s: float = Field(
        30.0, description="A consumer's unacknowledged events are taken over after this idle time."
    )
    worker_name: str = Field("", description="Consumer name in the group; empty = host-pid.")

    # --- observability ---
    metrics_port: int = Field(9090, description="Prometheus metrics port of the gateway; 0 = off.")
    metrics_host: str = Field(
        "127.0.0.1", description="Address the gateway's metrics endpoint binds to (the chart sets "
        "0.0.0.0 so Prometheus can scrape it). The model server binds Triton's HTTP, metrics and "
        "engine-metrics ports to the host of triton_url.")
    otlp_endpoint: str = Field("", description="OTLP/gRPC collector for traces; empty = off.")
    otlp_insecure: bool = Field(True, description="Plain-text OTLP (inside the cluster).")
    service_name: str = Field("worldserve-gateway", description="service.name of the traces.")
    log_format: str = Field("text", description="'text' or 'json' (with trace ids).")

    # --- front doors: `worldserve mcp`, `worldserve openenv` (docs/INTEGRATIONS.md) ---
    upstream_gateway: str = Field(
        "", description="gRPC address (host:port) the MCP and OpenEnv front doors dial; empty = "
        "gateway_host:gateway_port.")
    mcp_host: str = Field("127.0.0.1", description="Address the simulated MCP server binds to.")
    mcp_port: int = Field(8931, description="Port of the simulated MCP server (Streamable HTTP).")
    openenv_host: str = Field("127.0.0.1", description="Address the OpenEnv server binds to.")
    openenv_port: int = Field(8932, description="Port of the OpenEnv server (HTTP + /ws).")
    openenv_max_sessions: int = Field(
        1024, description="Concurrent OpenEnv WebSocket sessions one server process accepts.")
    openenv_max_turns: int = Field(
        32, ge=0, description="An OpenEnv episode is done after this many steps unless reset "
        "sets max_turns; 0 = no limit.")
    openenv_rubric: str = Field(
        "", description="'module:attribute' of an OpenEnv Rubric (or a factory of one) that "
        "scores each step; empty = reward 0.")
    openenv_terminate: str = Field(
        "", description="'module:attribute' of a predicate (action, observation, metadata) -> "
        "bool that ends an OpenEnv episode early; empty = only max_turns ends it.")
    openenv_python: str = Field(
        "", description="Interpreter of the OpenEnv environment (openenv pins packages our model "
        "server cannot share); empty = .venv-openenv/bin/python when it exists.")

    # --- operator ---
    operator_namespaces: list[str] = Field(
        [], description="Namespaces the operator watches; empty = the whole cluster."
    )

    # --- model backend ---
    triton_url: str = Field("127.0.0.1:8001", description="Triton gRPC endpoint (host:port).")
    backend_protocol: Literal["triton", "openai"] = Field(
        "triton", description="How the gateway reaches its single model server (without the "
        "registry): Triton's gRPC stream at triton_url, or an OpenAI-compatible completions "
        "server (vLLM, SGLang, transformers serve) at openai_url.")
    openai_url: str = Field("http://127.0.0.1:8000", description="OpenAI-compatible server.")
    openai_model: str = Field(
        "", description="Model name the OpenAI-compatible server serves; empty = model_dir.")
    openai_replicas: list[str] = Field(
        [], description="Several OpenAI-compatible servers of the same model (replicas); "
        "overrides openai_url: session affinity, bounded load, failover.")
    triton_replicas: list[str] = Field(
        [], description="Several Triton endpoints of the same model (replicas); overrides "
        "triton_url: session affinity, bounded load, failover."
    )
    replica_policy: Literal["affinity", "round_robin"] = Field(
        "affinity", description="'affinity' (rendezvous hashing on the root session, bounded "
        "load: KV reuse) or 'round_robin' (what a plain Service gives; a baseline)."
    )
    replica_load_floor: int = Field(
        8, ge=1, description="Affinity keeps a session on its replica while that replica has "
        "fewer in-flight calls than this, whatever the others carry (set it to the model "
        "server's batch size); above it, the 1.25x-of-fair-share bound applies."
    )
    triton_http_port: int = Field(8000, description="Triton HTTP port of the embedded server.")
    triton_metrics_port: int = Field(8002, description="Triton metrics port of the embedded server.")
    model_name: str = Field("worldmodel", description="Triton model name to call.")
    use_registry: bool = Field(
        False, description="Route by the operator's Redis model registry (versions, weights, "
        "endpoints) instead of the single triton_url/model_version_label."
    )
    model_context_tokens: int = Field(
        0, ge=0, description="The single model's context length in tokens; 0 = its config.json "
        "(max_position_embeddings). The gateway refuses a max_tokens that leaves no room for a "
        "prompt, and a rendered prompt that certainly does not fit (counted with the "
        "checkpoint's tokenizer.json, before any model time); the model server checks each "
        "prompt exactly.")
    model_version_label: str = Field(
        DEFAULT_MODEL_VERSION, description="Version recorded on each turn (name@version)."
    )
    model_dir: Path = Field(DEFAULT_MODEL_DIR, description="Checkpoint directory (HF layout).")
    model_domains: list[str] = Field(
        default_factory=list, description="Domains the single served model simulates (sessions "
        "in others get FAILED_PRECONDITION); empty = what the checkpoint's model card "
        "(README.md front matter) declares, or every domain when it declares none."
    )
    step_timeout_s: float = Field(120.0, description="Backend call limit when no deadline is set.")
    max_step_timeout_s: float = Field(
        600.0, description="Longest a step may run: a longer client deadline is cut to this.")
    reservation_lease_s: float = Field(
        10.0, description="An in-flight step's quota reservation lives this long unless its "
        "gateway renews it (four times a lease): a crashed gateway's slots free within it.")
    default_max_tokens: int = Field(DEFAULT_MAX_TOKENS,
                                    description="max_tokens when the session sets none.")
    default_temperature: float = Field(0.0, description="0 = greedy.")

    # --- model server ---
    engine: str = Field("transformers", description="'transformers', 'vllm' or 'instant' (no "
                        "model: a fixed answer at once, for benchmarks).")
    device: str = Field("auto", description="'auto' (cuda if present), 'cpu' or 'cuda'.")
    max_batch_size: int = Field(8, description="Requests decoded together by the engine.")
    batch_wait_ms: float = Field(5.0, description="How long the engine waits to fill a batch.")
    torch_threads: int = Field(0, ge=0, description="torch intra-op threads; 0 = on CPU every "
                               "usable core but one (the model server's Python and, on a small "
                               "machine, the gateway need one), on a GPU torch's default.")
    prefix_cache_bytes: int = Field(
        256 * 2**20, description="KV caches of recent prompt prefixes kept by the transformers "
        "engine (LRU, bytes); 0 = no reuse."
    )
    stream_interval_ms: float = Field(
        50.0, ge=0, description="The transformers engine streams a request's first 8 tokens "
        "one by one, then its text at most every this many ms, at once after a token that closes "
        "a tag, and at its end; 0 = token by token. Fewer messages through Triton and the "
        "gateway when many sessions decode at once; a reasoning budget is then enforced per "
        "chunk (0 for exact budgets)."
    )
    engine_long_prompt_tokens: int = Field(
        0, ge=0, description="The transformers engine's long lane: a prompt over this many "
        "tokens (0 = half the model's context) decodes in a batch of its own and is prefilled "
        "32 tokens at a time, so it never widens or stalls the other rows or takes their slots.")
    engine_long_share: float = Field(
        0.05, gt=0, le=1, description="The long lane's share of the engine's time while other "
        "rows are decoding (it takes all of it when alone, a 32-token chunk at a time). Bounds how "
        "much one request within the context can slow the others (issue 16).")
    engine_metrics_port: int = Field(
        0, description="Prometheus port of the model server's engine metrics (batch size, "
        "prefix-cache hits, reused tokens); 0 = off."
    )

    @property
    def frontend_upstream_target(self) -> str:
        """The gateway address the front doors (MCP, OpenEnv) dial."""
        return self.upstream_gateway or f"{self.gateway_host}:{self.gateway_port}"
