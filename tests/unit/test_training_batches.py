"""The training loop's batches: right padding, so the model runs without an attention mask."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from worldserve.training.memory import memory_trimmer
from worldserve.training.train import collate, forward_inputs, weighted_loss


def test_a_batch_without_a_mask_trains_as_it_would_with_one() -> None:
    torch.manual_seed(1)
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig(  # type: ignore[call-arg]
        vocab_size=50, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=64)).eval()
    items = [([3, 9, 4, 7, 11, 5, 8], [0.1, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0]),
             ([6, 2, 12], [0.1, 1.0, 1.0])]
    inp, mask, weights = collate(items, pad=0)
    assert inp[1].tolist() == [6, 2, 12, 0, 0, 0, 0]  # padded on the right
    assert weights[1, 3:].sum() == 0 and mask[1].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert set(forward_inputs(inp)) == {"input_ids"}
    with torch.no_grad():
        masked = model(input_ids=inp, attention_mask=mask).logits
        unmasked = model(**forward_inputs(inp)).logits
        alone = model(input_ids=inp[1:, :3]).logits  # the short row with no padding at all
    real = mask.bool()
    assert torch.allclose(masked[real], unmasked[real], atol=1e-5)
    assert torch.allclose(unmasked[1, :3], alone[0], atol=1e-5)
    assert torch.isclose(weighted_loss(masked, inp, weights), weighted_loss(unmasked, inp, weights),
                         atol=1e-6)


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_the_trim_hands_freed_memory_back() -> None:
    """glibc (Linux here): blocks freed inside the heap stay resident (glibc keeps them for
    reuse, the growth of session 23) until the trim returns their pages."""
    trim = memory_trimmer()
    assert trim is not None
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    size = 100_000  # under glibc's mmap threshold: from the heap
    blocks = [libc.malloc(size) for _ in range(300)]  # 30 MB, pages touched
    for b in blocks:
        ctypes.memset(b, 1, size)
    for b in blocks[:-1]:  # the last one holds the heap's top, so free() itself trims nothing
        libc.free(b)
    before = _resident_bytes()
    assert trim() == 1  # 1: memory was returned
    assert before - _resident_bytes() > 20_000_000
    libc.free(blocks[-1])
