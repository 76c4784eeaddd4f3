"""The optimizers compared (AdamW vs SGD and the momentum / adaptivity
ablations of arXiv 2602.07729; hyper-parameters ours) and their state size.

adamw        AdamW (β1, β2, λ from the config; verl defaults 0.9, 0.999, 0.01)
sgd          plain SGD, no momentum, no state
sgd_mom      SGD with momentum (momentum without adaptivity, torch convention)
adam_nomom   AdamW with β1 = 0 (adaptivity without momentum)
adam_noadapt Adam's bias-corrected EMA momentum with v ≡ 1 (momentum without adaptivity,
             same momentum form as Adam): θ -= η (m̂ + λθ)
"""
from __future__ import annotations

import math

import torch

NAMES = ("adamw", "sgd", "sgd_mom", "adam_nomom", "adam_noadapt")


class _Optimizer:
    """Minimal optimizer base. Written out (same update rules as torch.optim, checked against
    it in tests) because torch.optim.Optimizer.__init__ imports torch._dynamo, ~4 s per process."""

    def __init__(self, params, **hyper):
        self.params = [p for p in params if p.requires_grad]
        self.hyper = hyper
        self.state: dict = {}
        self.t = 0

    def zero_grad(self, set_to_none: bool = True):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        for p in self.params:
            if p.grad is not None:
                self._update(p, p.grad, self.state.setdefault(p, {}))


class AdamW(_Optimizer):
    """torch.optim.AdamW's rule (decoupled decay, bias correction, eps outside the sqrt)."""

    def _update(self, p, g, st):
        lr, (b1, b2), eps, wd = self.hyper["lr"], self.hyper["betas"], self.hyper["eps"], self.hyper["weight_decay"]
        if not st:
            st["exp_avg"], st["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        p.mul_(1 - lr * wd)
        st["exp_avg"].lerp_(g, 1 - b1)
        st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (st["exp_avg_sq"].sqrt() / math.sqrt(1 - b2 ** self.t)).add_(eps)
        p.addcdiv_(st["exp_avg"], denom, value=-lr / (1 - b1 ** self.t))


class SGD(_Optimizer):
    """torch.optim.SGD's rule: θ -= η g, or with momentum μ: b = μ b + g (b₁ = g), θ -= η b."""

    def _update(self, p, g, st):
        mu = self.hyper["momentum"]
        if mu:
            if "momentum_buffer" not in st:
                st["momentum_buffer"] = g.clone()
            else:
                st["momentum_buffer"].mul_(mu).add_(g)
            g = st["momentum_buffer"]
        p.add_(g, alpha=-self.hyper["lr"])


class AdamNoAdapt(_Optimizer):
    """Adam without the second moment: m = β1 m + (1−β1) g, θ -= η (m/(1−β1^t) + λθ)."""

    def _update(self, p, g, st):
        lr, b1, wd = self.hyper["lr"], self.hyper["beta1"], self.hyper["weight_decay"]
        if not st:
            st["exp_avg"] = torch.zeros_like(p)
        st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
        upd = st["exp_avg"] / (1 - b1 ** self.t)
        if wd:
            upd = upd + wd * p
        p.add_(upd, alpha=-lr)


def make(name: str, params, lr: float, betas=(0.9, 0.999), weight_decay: float = 0.01,
         momentum: float = 0.9, eps: float = 1e-8):
    if name == "adamw":
        return AdamW(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
    if name == "adam_nomom":
        return AdamW(params, lr=lr, betas=(0.0, betas[1]), eps=eps, weight_decay=weight_decay)
    if name == "adam_noadapt":
        return AdamNoAdapt(params, lr=lr, beta1=betas[0], weight_decay=weight_decay)
    if name == "sgd":
        return SGD(params, lr=lr, momentum=0.0)
    if name == "sgd_mom":
        return SGD(params, lr=lr, momentum=momentum)
    raise ValueError(f"unknown optimizer {name!r} (one of {', '.join(NAMES)})")


def state_bytes(opt) -> int:
    """Bytes of per-parameter state tensors (moments, momentum buffers). Scalar step
    counters are bookkeeping, not per-parameter state, and are not counted."""
    total = 0
    for p, st in opt.state.items():
        for v in st.values():
            if torch.is_tensor(v) and v.numel() == p.numel():
                total += v.numel() * v.element_size()
    return total
