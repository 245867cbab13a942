"""Metrics (Prometheus), traces (OpenTelemetry) and structured logs of worldserve processes."""
