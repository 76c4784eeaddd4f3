"""Triton kernels. Each `kernels/<name>.py` holds the Triton kernel, a pure-torch reference
with the same signature, and a dispatcher that picks Triton on CUDA and the reference
elsewhere (every kernel has a pure-torch reference with the same signature). Tests run the Triton kernel on CPU under TRITON_INTERPRET=1
against the reference; benchmarks compare both where a GPU exists.

Kernels so far: `quant` (LFQ's group-wise weight quantization), `rabitq` (RaBitQCache's
binary-key × INT4-query score estimate).
"""
from __future__ import annotations

import importlib.util
import os


def use_triton(*tensors) -> bool:
    """True when every tensor is on CUDA and Triton is importable, or when the Triton
    interpreter is forced on (TRITON_INTERPRET=1, for the CPU tests)."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    return bool(tensors) and all(getattr(t, "is_cuda", False) for t in tensors)
