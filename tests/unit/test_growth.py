"""Block expansion (training/growth.py): a deeper model that computes what the shallow one did."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from worldserve.training.growth import deepen, layer_order


def test_copies_follow_evenly_spaced_originals() -> None:
    assert layer_order(4, 4) == [(0, False), (1, False), (2, False), (3, False)]
    assert layer_order(4, 6) == [(0, False), (1, False), (1, True), (2, False), (3, False),
                                 (3, True)]
    assert [s for s, _ in layer_order(4, 8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert layer_order(4, 5)[-1] == (3, True)
    for bad in ((4, 3), (4, 9), (0, 2)):
        with pytest.raises(ValueError, match="cannot deepen"):
            layer_order(*bad)


def _tiny() -> Qwen3MoeForCausalLM:
    torch.manual_seed(0)
    config = Qwen3MoeConfig(  # type: ignore[call-arg]
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
        tie_word_embeddings=True)
    model = Qwen3MoeForCausalLM(config)
    with torch.no_grad():  # trained-looking weights: nothing left at its zero init
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def test_the_deeper_model_answers_as_the_shallow_one_did() -> None:
    shallow = _tiny()
    deeper = deepen(shallow, 5).eval()
    assert deeper.config.num_hidden_layers == 5 and len(deeper.model.layers) == 5
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(deeper(input_ids=ids).logits, shallow(input_ids=ids).logits)
    # the copies are real layers with their own trainable weights, silent only at the start
    copy, original = deeper.model.layers[1], shallow.model.layers[0]  # 0, 0', 1, 2, 2'
    torch.testing.assert_close(copy.self_attn.q_proj.weight, original.self_attn.q_proj.weight)
    torch.testing.assert_close(copy.mlp.experts.gate_up_proj, original.mlp.experts.gate_up_proj)
    assert torch.count_nonzero(copy.self_attn.o_proj.weight) == 0
    assert torch.count_nonzero(copy.mlp.experts.down_proj) == 0
    with torch.no_grad():  # its own weights, not the original's
        copy.self_attn.q_proj.weight.add_(1.0)
    assert not torch.equal(copy.self_attn.q_proj.weight, original.self_attn.q_proj.weight)
    assert deepen(shallow, 3) is shallow
