"""Deepen a trained model without changing what it computes (pure logic on weights).

Block expansion: the deeper model keeps every trained layer in order and places a copy of some
of them right after the original. A copy's attention output projection and its experts' down
projections are zero, so at first it adds nothing to the residual stream: the deeper model
answers exactly as the shallower one did, and training can put the new layers to use from
there (the recipe of LLaMA Pro, Wu et al. 2024, applied to every stage's weights here).
"""

from __future__ import annotations

from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

# The parameters of a layer whose outputs enter the residual stream: zero in a copy.
_OUTPUTS = ("self_attn.o_proj.weight", "mlp.experts.down_proj")


def layer_order(old: int, new: int) -> list[tuple[int, bool]]:
    """For each layer of the deeper model: the trained layer it starts from, and whether it is
    a (silent) copy. The copies sit after evenly spaced originals, the last one included."""
    if old < 1 or not old <= new <= 2 * old:
        raise ValueError(f"cannot deepen {old} layers to {new} (one copy per layer at most)")
    extra = new - old
    after = {(j + 1) * old // extra - 1 for j in range(extra)}  # distinct: old / extra >= 1
    order: list[tuple[int, bool]] = []
    for i in range(old):
        order.append((i, False))
        if i in after:
            order.append((i, True))
    return order


def deepen(model: Qwen3MoeForCausalLM, layers: int) -> Qwen3MoeForCausalLM:
    """``model`` with ``layers`` decoder layers, computing the same function."""
    old = model.config.num_hidden_layers
    if layers == old:
        return model
    order = layer_order(old, layers)
    raw = model.config.to_dict()
    raw["num_hidden_layers"] = layers
    raw.pop("layer_types", None)  # derived from the depth again
    config = Qwen3MoeConfig(**raw)
    weights = model.state_dict()
    out = {k: v for k, v in weights.items() if not k.startswith("model.layers.")}
    for index, (source, silent) in enumerate(order):
        prefix = f"model.layers.{source}."
        for key, value in weights.items():
            if key.startswith(prefix):
                name = key[len(prefix):]
                copied = value.detach().clone()
                if silent and name in _OUTPUTS:
                    copied.zero_()
                out[f"model.layers.{index}.{name}"] = copied
    deeper = Qwen3MoeForCausalLM(config)
    deeper.load_state_dict(out)
    return deeper.to(model.dtype)  # type: ignore[arg-type]
