"""Token F1 of a predicted against a real observation (pure)."""

from __future__ import annotations

from collections import Counter


def token_f1(predicted: str, reference: str) -> float:
    """Bag-of-whitespace-tokens F1; two empty strings agree fully."""
    p, r = predicted.split(), reference.split()
    if not p and not r:
        return 1.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)
