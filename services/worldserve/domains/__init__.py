"""Pure world-model message logic: prompts per domain, chat rendering, output parsing.

Nothing in this package does I/O or imports grpc, redis, tritonclient or torch.
"""
