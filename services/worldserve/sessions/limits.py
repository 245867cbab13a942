"""Size limits of what a session carries (pure): bytes of text, labels.

Labels are copied into every fork and every ListSessions page, so their count and sizes are
bounded when a session is created, forked or imported (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from worldserve.errors import InvalidArgument, echo

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the gateway's gRPC message limit, both directions
MAX_REPLY_BYTES = MAX_MESSAGE_BYTES - 64 * 1024  # room for a reply's other fields
MAX_LABELS = 64
MAX_LABEL_KEY_BYTES = 128
MAX_LABEL_VALUE_BYTES = 1024


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (what every byte limit of a request counts)."""
    return len(text.encode("utf-8", "surrogatepass"))


def check_labels(labels: dict[str, str] | None) -> dict[str, str]:
    """``labels`` (a copy) when within the limits; INVALID_ARGUMENT naming the first breach."""
    labels = dict(labels or {})
    if len(labels) > MAX_LABELS:
        raise InvalidArgument(f"a session holds at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        if not key:
            raise InvalidArgument("a label key must not be empty")
        if utf8_size(key) > MAX_LABEL_KEY_BYTES:
            raise InvalidArgument(f"label key {echo(key)} exceeds {MAX_LABEL_KEY_BYTES} bytes")
        if utf8_size(value) > MAX_LABEL_VALUE_BYTES:
            raise InvalidArgument(f"label {echo(key)}'s value exceeds {MAX_LABEL_VALUE_BYTES} "
                                  "bytes")
    return labels
