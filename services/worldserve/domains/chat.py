"""Render chat messages with a checkpoint's own Jinja chat template, as Hugging Face does.

The Triton vLLM backend applies no template (docs/ARCHITECTURE.md §5), so the gateway renders the prompt
itself; a sandboxed environment keeps a template shipped with a checkpoint from reaching Python.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jinja2 import Template
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template is broken or refused the messages."""


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)


@lru_cache(maxsize=16)
def _compile(source: str) -> Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    env.filters["tojson"] = _tojson
    try:
        return env.from_string(source)
    except TemplateError as exc:
        raise ChatTemplateError(f"chat template does not compile: {exc}") from exc


def render_chat(
    template: str,
    messages: list[dict[str, str]],
    add_generation_prompt: bool = True,
    **extra: Any,
) -> str:
    """The prompt string for ``messages``; raises ChatTemplateError on a template failure."""
    try:
        return _compile(template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, **extra
        )
    except TemplateError as exc:
        raise ChatTemplateError(f"chat template failed: {exc}") from exc
