"""worldserve: simulator-as-a-service for language world models."""

__version__ = "0.1.0"
