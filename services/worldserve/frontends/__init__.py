"""Front doors for other ecosystems (MCP, OpenEnv): separate processes that reach the gateway
through the SDK over gRPC and import nothing of the gateway (docs/ARCHITECTURE.md §8)."""
