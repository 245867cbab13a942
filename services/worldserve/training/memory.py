"""Handing freed heap memory back to the system (glibc's ``malloc_trim``).

PyTorch on a CPU allocates each step's activations anew, in shapes that change from batch to
batch, and glibc keeps the freed blocks: session 23's stage of 16,384-token batches grew to
23.7 GB in 28 minutes and the OOM killer stopped it. One ``malloc_trim(0)`` per training step
keeps the memory flat at 1.39x the tokens per second of the alternative (an mmap threshold of
64 KiB; session 29, bench/alloc_speed.py, docs/BENCHMARKS.md). The held-out evaluation that
``train`` runs after a stage, in the same process, grew from 4.2 to 8.1 GB the same way
(session 30); ``heldout.generate`` trims after every batch.
"""

from __future__ import annotations

from collections.abc import Callable


def memory_trimmer() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, which returns the free pages of every arena to the system;
    None where there is no glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        malloc_trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return lambda: malloc_trim(0)
