"""Fidelity scores of predicted against real observations (pure)."""

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


def score_pairs(pairs: list[tuple[str, str]]) -> dict[str, object]:
    """Exact match and mean token F1 over (predicted, reference) pairs."""
    n = max(len(pairs), 1)
    exact = sum(p.strip() == r.strip() for p, r in pairs) / n
    f1 = sum(token_f1(p, r) for p, r in pairs) / n
    return {"n": len(pairs), "exact_match": round(exact, 4), "token_f1": round(f1, 4)}
