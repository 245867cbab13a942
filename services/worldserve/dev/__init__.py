"""Local launcher: find or start Redis and PostgreSQL, start Triton and the gateway."""
