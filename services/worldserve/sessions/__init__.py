"""Session state: the records (pure), the admission rules (pure) and the Redis store (I/O)."""
