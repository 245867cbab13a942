"""Read what the gateway needs from a Hugging Face checkpoint directory: its chat template and
context length."""

from __future__ import annotations

import json
from pathlib import Path


class ChatTemplateMissing(FileNotFoundError):
    pass


def load_chat_template(model_dir: Path) -> str:
    """``chat_template.jinja`` (transformers 5 layout) or ``tokenizer_config.json``'s field."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text()).get("chat_template")
        if isinstance(template, str):
            return template
        if isinstance(template, list):  # named templates: take "default"
            for entry in template:
                if entry.get("name") == "default":
                    return str(entry["template"])
    raise ChatTemplateMissing(f"no chat template in {model_dir}")


def load_context_tokens(model_dir: Path) -> int:
    """``config.json``'s ``max_position_embeddings`` (0 when the checkpoint does not say)."""
    config = model_dir / "config.json"
    if not config.is_file():
        return 0
    raw = json.loads(config.read_text())
    value = raw.get("max_position_embeddings") or (raw.get("text_config") or {}).get(
        "max_position_embeddings")
    return int(value) if isinstance(value, int) else 0
