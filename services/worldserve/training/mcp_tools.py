"""Real local tools behind an MCP-style call format; their JSON answers become MCP training data.

Action: ``{"tool": NAME, "arguments": {...}}``. Observation: the JSON result or error object the
tool returned. The tools keep state (a key-value store, a notes list) within an episode.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from worldserve.training.terminal import WORDS

UNITS = {("km", "m"): 1000, ("m", "cm"): 100, ("kg", "g"): 1000, ("h", "min"): 60, ("min", "s"): 60}


@dataclass
class ToolBox:
    rng: random.Random
    kv: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (
            "Tools: calculator(op: add|sub|mul|div, a, b); kv_set(key, value); kv_get(key); "
            "kv_delete(key); text_stats(text); convert(value, from, to); add_note(text); "
            "list_notes()"
        )

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            handler = getattr(self, f"_t_{tool}")
        except AttributeError:
            return {"error": {"code": -32601, "message": f"unknown tool: {tool}"}}
        try:
            return {"result": handler(**args)}
        except TypeError:
            return {"error": {"code": -32602, "message": f"invalid arguments for {tool}"}}
        except (KeyError, ValueError, ZeroDivisionError) as exc:
            return {"error": {"code": -32000, "message": f"{type(exc).__name__}: {exc}"}}

    def _t_calculator(self, op: str, a: float, b: float) -> float:
        ops = {"add": a + b, "sub": a - b, "mul": a * b}
        if op == "div":
            return a / b
        if op not in ops:
            raise ValueError(f"unsupported op {op}")
        return ops[op]

    def _t_kv_set(self, key: str, value: str) -> dict[str, Any]:
        self.kv[key] = value
        return {"ok": True, "size": len(self.kv)}

    def _t_kv_get(self, key: str) -> dict[str, Any]:
        if key not in self.kv:
            raise KeyError(key)
        return {"key": key, "value": self.kv[key]}

    def _t_kv_delete(self, key: str) -> dict[str, Any]:
        del self.kv[key]
        return {"ok": True, "size": len(self.kv)}

    def _t_text_stats(self, text: str) -> dict[str, Any]:
        return {"chars": len(text), "words": len(text.split())}

    def _t_convert(self, value: float, **units: str) -> dict[str, Any]:
        pair = (units["from"], units["to"])
        if pair not in UNITS:
            raise ValueError(f"cannot convert {pair[0]} to {pair[1]}")
        return {"value": value * UNITS[pair], "unit": pair[1]}

    def _t_add_note(self, text: str) -> dict[str, Any]:
        self.notes.append(text)
        return {"id": len(self.notes)}

    def _t_list_notes(self) -> list[str]:
        return list(self.notes)

    def next_call(self) -> tuple[str, str]:
        """A JSON tool call and a short reasoning line."""
        r = self.rng
        word = r.choice(WORDS)
        keys = sorted(self.kv)
        choice = r.choice(["calc", "calc", "set", "get", "get", "delete", "stats", "convert",
                           "note", "list", "unknown", "badargs"])
        if choice == "calc":
            op = r.choice(["add", "sub", "mul", "div"])
            b = 0 if op == "div" and r.random() < 0.2 else r.randint(1, 50)
            call = {"tool": "calculator", "arguments": {"op": op, "a": r.randint(0, 99), "b": b}}
            why = f"The calculator applies {op}."
        elif choice == "set":
            call = {"tool": "kv_set", "arguments": {"key": word, "value": r.choice(WORDS)}}
            why = f"kv_set stores {word}."
        elif choice in ("get", "delete"):
            key = r.choice(keys) if keys and r.random() < 0.7 else word
            call = {"tool": f"kv_{choice}", "arguments": {"key": key}}
            why = f"kv_{choice} needs {key} to have been stored earlier."
        elif choice == "stats":
            text = " ".join(r.choice(WORDS) for _ in range(r.randint(1, 5)))
            call = {"tool": "text_stats", "arguments": {"text": text}}
            why = "text_stats counts characters and words."
        elif choice == "convert":
            src, dst = r.choice([*UNITS, ("m", "kg")])
            call = {"tool": "convert", "arguments": {"value": r.randint(1, 20), "from": src, "to": dst}}
            why = f"Converting {src} to {dst}."
        elif choice == "note":
            call = {"tool": "add_note", "arguments": {"text": word}}
            why = "add_note appends a note and returns its id."
        elif choice == "list":
            call = {"tool": "list_notes", "arguments": {}}
            why = "list_notes returns every note added so far."
        elif choice == "unknown":
            call = {"tool": r.choice(["weather", "search_web", "send_mail"]), "arguments": {"q": word}}
            why = "This tool is not provided by the server."
        else:
            call = {"tool": "calculator", "arguments": {"op": "add", "a": 1}}
            why = "The call lacks an argument."
        return json.dumps(call), why

    def run(self, action: str) -> str:
        call = json.loads(action)
        return json.dumps(self.call(call["tool"], call["arguments"]))
