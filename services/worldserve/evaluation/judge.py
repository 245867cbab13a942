"""An LLM judge through any OpenAI-compatible chat endpoint, with the five-dimension rubric.

Each dimension is scored 1-5 by the judge and reported as (x - 1) / 4 * 100, as in the
AgentWorldBench paper; the overall judge score is the mean of the five.
"""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")

RUBRIC = """You grade a world model that predicts an environment's next observation.
Compare the PREDICTED observation with the REAL one, given the agent's ACTION, and score each
dimension from 1 (bad) to 5 (indistinguishable from the real environment):
- format: the observation has the environment's own format (shell output, JSON result, page text)
- factuality: facts, values and names agree with the real observation
- consistency: it is consistent with the action and what earlier turns established
- realism: a real environment could have produced it
- quality: overall usefulness as a training signal
Answer with one JSON object and nothing else, e.g.
{"format": 5, "factuality": 3, "consistency": 4, "realism": 4, "quality": 3}"""


def normalise(x: float) -> float:
    return (min(max(x, 1.0), 5.0) - 1.0) / 4.0 * 100.0


def parse_scores(text: str) -> dict[str, float]:
    """The judge's JSON (the first object in its answer), normalised to 0-100."""
    match = re.search(r"\{.*?\}", text, re.DOTALL)
    if not match:
        raise ValueError(f"the judge gave no JSON object: {text[:200]!r}")
    raw = json.loads(match.group(0))
    missing = [d for d in DIMENSIONS if d not in raw]
    if missing:
        raise ValueError(f"the judge left out {missing}")
    return {d: normalise(float(raw[d])) for d in DIMENSIONS}


@dataclass(frozen=True, slots=True)
class Judge:
    base_url: str  # e.g. http://localhost:8000/v1
    model: str
    api_key: str = ""
    timeout_s: float = 120.0

    def messages(self, action: str, predicted: str, reference: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": RUBRIC},
                {"role": "user", "content": f"ACTION:\n{action}\n\nREAL:\n{reference}\n\n"
                                            f"PREDICTED:\n{predicted}"}]

    def score(self, action: str, predicted: str, reference: str) -> dict[str, float]:
        body = json.dumps({"model": self.model, "temperature": 0,
                           "messages": self.messages(action, predicted, reference)}).encode()
        request = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions", data=body, method="POST",
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            answer = json.loads(response.read())
        return parse_scores(answer["choices"][0]["message"]["content"])
