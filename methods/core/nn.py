"""Torch building blocks shared by the papers' hand-written models."""
from __future__ import annotations

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    """y = w ⊙ x / sqrt(mean(x²) + eps) over the last dim (Zhang & Sennrich, arXiv 1910.07467,
    Eq. 4, with ε inside the root as in Llama), gain w initialised to ones.

    `eps` has no default: each model passes its own. Half-precision inputs are normalised in
    float32 and cast back before the gain (as transformers' LlamaRMSNorm); float32/float64
    inputs are computed in their own dtype, so float64 tests are exact to float64 rounding.
    `param` is the gain's attribute and state-dict name ("weight" by default; a model whose
    saved checkpoints call it otherwise passes that name, so they keep loading)."""

    def __init__(self, dim: int, eps: float, param: str = "weight"):
        super().__init__()
        self.eps = eps
        self.param = param
        self.register_parameter(param, nn.Parameter(torch.ones(dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self._parameters[self.param] * xf.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self._parameters[self.param].shape[0]}, eps={self.eps}"
