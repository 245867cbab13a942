"""Structured JSON logs carrying the current trace id (``WORLDSERVE_LOG_FORMAT=json``).

Secrets never reach a log line: API keys are not logged anywhere, and this formatter also masks
anything that looks like a worldserve key or a bearer header, in case a library logs one.
"""

from __future__ import annotations

import json
import logging
import re

from worldserve.observability.tracing import current_trace_id

_SECRET = re.compile(r"(wsk_[A-Za-z0-9_-]{4,}|Bearer\s+\S+|postgresql://[^@\s]*@)")


def redact(text: str) -> str:
    return _SECRET.sub("[redacted]", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": redact(record.getMessage())}
        trace_id = current_trace_id()
        if trace_id:
            entry["trace_id"] = trace_id
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else RedactingFormatter(
        "%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
