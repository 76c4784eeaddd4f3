"""Tiny Llama-style LM in plain torch (RMSNorm, SwiGLU, learned positions).

Plain torch keeps each DAG step's start-up to torch's import (no transformers); weights are
stored with safetensors. `forward(ids) → logits` is all the GRPO loop needs, so the same loop
also drives an HF `LlamaForCausalLM` (the trl cross-check) through `logits_fn`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from methods.core.nn import RMSNorm
from methods.core.results import InputError, atomic_path

NORM_EPS = 1e-5   # the RMSNorm ε of every norm of the tiny LM


@dataclass
class TinyConfig:
    vocab_size: int = 15
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 172
    max_seq_len: int = 16
    init_std: float = 0.02


class Block(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.h = c.n_heads
        self.attn_norm = RMSNorm(c.d_model, NORM_EPS)
        self.q_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.o_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.mlp_norm = RMSNorm(c.d_model, NORM_EPS)
        self.gate_proj = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.up_proj = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.down_proj = nn.Linear(c.d_ff, c.d_model, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (p(h).view(b, t, self.h, d // self.h).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class TinyLM(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.max_seq_len, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, NORM_EPS)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=c.init_std)

    def forward(self, ids):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.norm(x))


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def round_to_bf16(model) -> None:
    """Cast every weight to bf16 and back, so the base checkpoint is bf16-representable."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def save(model, out_dir: str | Path, extra: dict | None = None) -> None:
    from safetensors.torch import save_file

    with atomic_path(out_dir, is_dir=True) as tmp:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(asdict(model.config), indent=1))
        if extra:
            (tmp / "meta.json").write_text(json.dumps(extra, indent=1))


def load(path: str | Path) -> TinyLM:
    from safetensors.torch import load_file

    p = Path(path)
    if not (p / "config.json").is_file() or not (p / "model.safetensors").is_file():
        raise InputError(f"not a rl_sgd model directory (config.json + model.safetensors): {p}")
    model = TinyLM(TinyConfig(**json.loads((p / "config.json").read_text())))
    model.load_state_dict(load_file(str(p / "model.safetensors")))
    return model


def state_dict_of(path: str | Path) -> dict:
    from safetensors.torch import load_file

    f = Path(path) / "model.safetensors"
    shards = sorted(Path(path).glob("model-*-of-*.safetensors"))
    if not f.is_file() and shards:  # a sharded `save_pretrained` directory (hub path)
        out = {}
        for s in shards:
            out.update(load_file(str(s)))
        return out
    if not f.is_file():
        raise InputError(f"missing weights: {f}")
    return load_file(str(f))
