"""Grow a trained model without changing what it computes (pure logic on weights).

Deeper (``deepen``): block expansion. The deeper model keeps every trained layer in order and
places a copy of some of them right after the original. A copy's attention output projection
and its experts' down projections are zero, so at first it adds nothing to the residual stream:
the deeper model answers exactly as the shallower one did, and training can put the new layers
to use from there (the recipe of LLaMA Pro, Wu et al. 2024, applied to every stage's weights
here).

Wider attention (``widen_heads``): twice the query and key/value heads. Each trained head is
kept twice, each copy beside a copy of its key/value head, and each copy's columns of the output
projection are halved, so the two sum to what the one head gave (Net2WiderNet, Chen et al.
2016). The second copy's query projection gets a little noise, or the two would stay twins: the
same weights get the same gradients.
"""

from __future__ import annotations

import torch
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


def head_sources(heads: int, kv_heads: int) -> list[int]:
    """For each query head of the doubled model, the trained head it starts from. A key/value
    head serves ``heads // kv_heads`` neighbouring query heads (transformers' ``repeat_kv``);
    in the doubled model key/value head ``j`` is a copy of head ``j // 2``, and its query heads
    copy, in order, the query heads that head served."""
    if heads < 1 or kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"{heads} query heads cannot share {kv_heads} key/value heads")
    group = heads // kv_heads
    return [(n // (2 * group)) * group + n % group for n in range(2 * heads)]


def widen_heads(model: Qwen3MoeForCausalLM, noise: float = 1e-2, seed: int = 0
                ) -> Qwen3MoeForCausalLM:
    """``model`` with twice the attention heads; with ``noise`` 0 it computes the same function
    (the second copy of each head gets ``noise`` times its query weights' spread)."""
    cfg = model.config
    heads, kv_heads, dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    sources = head_sources(heads, kv_heads)
    group = heads // kv_heads  # query heads per key/value head
    second = torch.tensor([(n // group) % 2 == 1 for n in range(2 * heads)])  # beside kv j'
    kv_sources = [j // 2 for j in range(2 * kv_heads)]
    raw = cfg.to_dict()
    raw["num_attention_heads"], raw["num_key_value_heads"] = 2 * heads, 2 * kv_heads
    wider = Qwen3MoeForCausalLM(Qwen3MoeConfig(**raw))
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in model.state_dict().items():
        w = value.detach().float()
        if key.endswith("self_attn.q_proj.weight"):
            blocks = w.view(heads, dim, -1)[sources].clone()
            blocks[second] += noise * w.std() * torch.randn(blocks[second].shape, generator=gen)
            w = blocks.reshape(2 * heads * dim, -1)
        elif key.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            w = w.view(kv_heads, dim, -1)[kv_sources].reshape(2 * kv_heads * dim, -1)
        elif key.endswith("self_attn.o_proj.weight"):
            w = w.view(-1, heads, dim)[:, sources].reshape(w.shape[0], -1) / 2
        out[key] = w.to(value.dtype)
    wider.load_state_dict(out)
    return wider.to(model.dtype)  # type: ignore[arg-type]
