"""Per-tenant quotas: pure arithmetic (``limits``) and the atomic Redis counters (``counters``)."""
