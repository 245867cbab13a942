"""Block expansion (training/growth.py): a deeper model that computes what the shallow one did."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from worldserve.training.growth import deepen, head_sources, layer_order, widen_heads


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


def test_each_head_is_kept_twice_beside_a_copy_of_its_key_value_head() -> None:
    # 4 query heads over 2 key/value heads: heads 0, 1 use kv 0; 2, 3 use kv 1. Doubled, kv
    # heads are 0, 0', 1, 1' and their query heads 0, 1 | 0', 1' | 2, 3 | 2', 3'.
    assert head_sources(4, 2) == [0, 1, 0, 1, 2, 3, 2, 3]
    assert head_sources(2, 2) == [0, 0, 1, 1]
    assert head_sources(4, 1) == [0, 1, 2, 3, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="cannot share"):
        head_sources(4, 3)


def test_the_wider_model_answers_as_the_narrow_one_did() -> None:
    narrow = _tiny()
    ids = torch.randint(0, 64, (2, 12))
    exact = widen_heads(narrow, noise=0.0).eval()
    assert (exact.config.num_attention_heads, exact.config.num_key_value_heads) == (8, 4)
    attn = exact.model.layers[0].self_attn
    assert attn.q_proj.weight.shape == (8 * 8, 32) and attn.o_proj.weight.shape == (32, 8 * 8)
    with torch.no_grad():
        torch.testing.assert_close(exact(input_ids=ids).logits, narrow(input_ids=ids).logits)
        # with noise, each head's second copy (heads 2, 3, 6, 7 here) differs a little from
        # its first, which is the trained head itself; the answer hardly moves
        noisy = widen_heads(narrow, noise=1e-3).eval()
        q = noisy.model.layers[0].self_attn.q_proj.weight.view(8, 8, 32)
        trained = narrow.model.layers[0].self_attn.q_proj.weight.view(4, 8, 32)
        assert torch.equal(q[0], trained[0]) and torch.equal(q[4], trained[2])
        assert not torch.equal(q[2], trained[0])
        torch.testing.assert_close(q[2], trained[0], atol=1e-3, rtol=0)
        torch.testing.assert_close(noisy(input_ids=ids).logits, narrow(input_ids=ids).logits,
                                   atol=1e-3, rtol=0)
