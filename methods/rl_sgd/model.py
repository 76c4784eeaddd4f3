"""Tiny Llama LM in plain torch (RMSNorm, SwiGLU, rotary positions), saved as a Llama checkpoint.

The module tree, parameter names and arithmetic are those of transformers' `LlamaForCausalLM`
(no biases, untied head, RoPE with the default rotation, ε inside the RMSNorm root), so a saved
directory (`config.json` with `model_type: llama` + `model.safetensors`) loads with
`AutoModelForCausalLM.from_pretrained` and gives the same logits (tests/rl_sgd/test_model.py).
The forward pass stays in plain torch so that each DAG step's start-up is torch's import alone.
`forward(ids) → logits` is all the GRPO loop needs, so the same loop also drives an HF model
(the trl cross-check and the paper-scale hub models).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from methods.core.nn import RMSNorm
from methods.core.results import InputError, atomic_path, dumps as strict_dumps, read_json

NORM_EPS = 1e-5        # the RMSNorm ε of every norm of the tiny LM
ROPE_THETA = 10000.0   # Llama's default rotary base


@dataclass
class TinyConfig:
    vocab_size: int = 15
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 172
    max_seq_len: int = 16
    init_std: float = 0.02


def hf_config(c: TinyConfig) -> dict:
    """The `config.json` of a `LlamaConfig` with this architecture (written without importing
    transformers; the loading test checks transformers reads it as this model)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_heads, "head_dim": c.d_model // c.n_heads,
            "max_position_embeddings": c.max_seq_len, "hidden_act": "silu", "rms_norm_eps": NORM_EPS,
            "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA}, "attention_bias": False,
            "attention_dropout": 0.0, "mlp_bias": False, "tie_word_embeddings": False,
            "initializer_range": c.init_std, "use_cache": True, "dtype": "float32"}


def tiny_config(hf: dict) -> TinyConfig:
    """Inverse of `hf_config`; refuses a Llama config this plain-torch model does not implement."""
    try:
        rope = hf.get("rope_parameters") or {"rope_type": "default", "rope_theta": hf.get("rope_theta")}
        unsupported = {"model_type": hf["model_type"] != "llama",
                       "num_key_value_heads": hf["num_key_value_heads"] != hf["num_attention_heads"],
                       "head_dim": hf.get("head_dim", hf["hidden_size"] // hf["num_attention_heads"])
                       != hf["hidden_size"] // hf["num_attention_heads"],
                       "rope_parameters": rope.get("rope_type") != "default" or rope.get("rope_theta") != ROPE_THETA,
                       "rms_norm_eps": hf["rms_norm_eps"] != NORM_EPS, "hidden_act": hf["hidden_act"] != "silu",
                       "tie_word_embeddings": bool(hf.get("tie_word_embeddings")),
                       "attention_bias": bool(hf.get("attention_bias")), "mlp_bias": bool(hf.get("mlp_bias"))}
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise InputError(f"config.json: {bad[0]}={hf.get(bad[0])!r} is not the tiny Llama this model implements")
        return TinyConfig(vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
                          n_heads=hf["num_attention_heads"], d_ff=hf["intermediate_size"],
                          max_seq_len=hf["max_position_embeddings"], init_std=hf["initializer_range"])
    except KeyError as e:
        raise InputError(f"config.json: missing key {e.args[0]!r} of a Llama config") from None


def rope_cos_sin(t: int, head_dim: int, device, dtype):
    """cos, sin of shape (t, head_dim) for positions 0..t-1: frequencies θ^(-2i/d), each
    repeated over the two halves (the rotate-half layout of transformers' Llama)."""
    inv = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    ang = torch.arange(t, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def _rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.h = c.n_heads
        self.q_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.o_proj = nn.Linear(c.d_model, c.d_model, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.h, d // self.h).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(_rotate(q, cos, sin), _rotate(k, cos, sin), v, is_causal=True)
        return self.o_proj(a.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.up_proj = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.down_proj = nn.Linear(c.d_ff, c.d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.d_model, NORM_EPS)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.d_model, NORM_EPS)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    """`LlamaModel`'s parameters: token embedding, blocks, final norm."""

    def __init__(self, c: TinyConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, NORM_EPS)


class TinyLM(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.config = c
        self.model = Body(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=c.init_std)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        cos, sin = rope_cos_sin(ids.shape[1], self.config.d_model // self.config.n_heads, ids.device, x.dtype)
        for blk in self.model.layers:
            x = blk(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def round_to_bf16(model) -> None:
    """Cast every weight to bf16 and back, so the base checkpoint is bf16-representable."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def save(model, out_dir: str | Path, extra: dict | None = None) -> None:
    """A `save_pretrained`-format directory: config.json (Llama) + model.safetensors (+ meta.json)."""
    from safetensors.torch import save_file

    with atomic_path(out_dir, is_dir=True) as tmp:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(hf_config(model.config), indent=1))
        if extra:
            (tmp / "meta.json").write_text(strict_dumps(extra, indent=1))


def load(path: str | Path) -> TinyLM:
    from methods.core.safeload import load_safetensors

    p = Path(path)
    if not (p / "config.json").is_file() or not (p / "model.safetensors").is_file():
        raise InputError(f"not a rl_sgd model directory (config.json + model.safetensors): {p}")
    try:
        hf = read_json(p / "config.json")
        sd = load_safetensors(p / "model.safetensors")
    except InputError as e:
        raise InputError(f"corrupt model directory {p}: {e}") from None
    model = TinyLM(tiny_config(hf))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise InputError(f"{p / 'model.safetensors'}: missing {missing[:3]}, unexpected {unexpected[:3]} tensors")
    return model


def state_dict_of(path: str | Path) -> dict:
    from methods.core.safeload import load_safetensors

    f = Path(path) / "model.safetensors"
    shards = sorted(Path(path).glob("model-*-of-*.safetensors"))
    if not f.is_file() and shards:  # a sharded `save_pretrained` directory (hub path)
        out = {}
        for s in shards:
            out.update(load_safetensors(s))
        return out
    if not f.is_file():
        raise InputError(f"missing weights: {f}")
    return load_safetensors(f)
