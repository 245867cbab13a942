"""Model backends: the port the gateway calls and its Triton implementation."""
