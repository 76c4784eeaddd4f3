"""A tiny MoE-Llama: transformers' Llama decoder (attention, RMSNorm, RoPE, tied embeddings) whose
FFN in every layer is `methods.core.moe.MoELayer` (softmax → top-K → renormalised gates) plus
`n_shared` always-on SwiGLU experts. Checkpoints are `torch.save` dicts of tensors and plain
config values, loaded with weights_only=True.

Each FFN keeps its last routing (`last`: MoEOutput) and, once `attach_reference()` has frozen a
float32 copy of the router weights, the reference log-probabilities on the *current* hidden
state (`ref_logp`) for the trust-region term.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from methods.core.models import ModelConfig
from methods.core.moe import MoELayer, SwiGLUExperts
from methods.core.results import InputError, atomic_path
from methods.remoe.config import MoEConfig


class MoEFFN(nn.Module):
    def __init__(self, d: int, m: MoEConfig):
        super().__init__()
        self.moe = MoELayer(d, m.n_experts, m.k, m.expert_d_ff, renormalize=True,
                            dispatch=m.dispatch, softmax_dtype=torch.float32, aux_per_slot=True)
        self.shared = SwiGLUExperts(m.n_shared, d, m.expert_d_ff, "dense") if m.n_shared else None
        self.register_buffer("ref_weight", None, persistent=False)
        self.last = None
        self.ref_logp = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.moe(x)
        self.last = out
        y = out.y
        if self.shared is not None:
            x2 = x.reshape(-1, x.shape[-1])
            idx = torch.arange(self.shared.n_experts, device=x.device).expand(x2.shape[0], -1)
            y = y + self.shared.apply_slots(x2, idx).sum(1).reshape(x.shape)
        if self.ref_weight is not None:
            self.ref_logp = F.log_softmax(x.reshape(-1, x.shape[-1]).float() @ self.ref_weight.T, -1)
        return y


def llama_cfg(m: ModelConfig, vocab_size: int):
    from transformers import LlamaConfig

    if m.d_model % m.n_heads:
        raise InputError(f"config key 'model.d_model': {m.d_model} not divisible by n_heads {m.n_heads}")
    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=m.d_model, intermediate_size=m.d_ff,
        num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads,
        num_key_value_heads=m.n_kv_heads or m.n_heads, max_position_embeddings=m.max_seq_len,
        rms_norm_eps=m.norm_eps, rope_parameters={"rope_type": "default", "rope_theta": m.rope_theta},
        tie_word_embeddings=m.tie_embeddings, initializer_range=m.init_std,
        attention_bias=False, mlp_bias=False, use_cache=False)


def build(m: ModelConfig, moe: MoEConfig, vocab_size: int, seed: int):
    from transformers import LlamaForCausalLM

    if not 1 <= moe.k <= moe.n_experts:
        raise InputError(f"config key 'moe.k': need 1 <= k={moe.k} <= n_experts={moe.n_experts}")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_cfg(m, vocab_size))
    model.config._attn_implementation = "sdpa"
    for layer in model.model.layers:  # MoE replaces the dense SwiGLU
        layer.mlp = MoEFFN(m.d_model, moe)
    return model


def ffns(model) -> list[MoEFFN]:
    return [layer.mlp for layer in model.model.layers]


def attach_reference(model) -> None:
    """Freeze a float32 copy of every router as the trust-region reference."""
    for f in ffns(model):
        f.ref_weight = f.moe.router.proj.weight.detach().float().clone()


def gate_only(model) -> list[str]:
    """Freeze everything but the routers' weights; return the trainable parameter names."""
    model.requires_grad_(False)
    names = []
    for n, p in model.named_parameters():
        if n.endswith("mlp.moe.router.proj.weight"):
            p.requires_grad_(True)
            names.append(n)
    return names


def save(model, m: ModelConfig, moe: MoEConfig, vocab_size: int, path: str | Path, meta: dict | None = None):
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    obj = {"model": asdict(m), "moe": asdict(moe), "vocab_size": vocab_size, "state": state,
           "meta": meta or {}}
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load(path: str | Path):
    from methods.core.results import InputError
    from methods.core.safeload import load_pt, load_weights

    obj = load_pt(path, keys=("model", "moe", "vocab_size", "state", "meta"))
    try:
        m, moe = ModelConfig(**obj["model"]), MoEConfig(**obj["moe"])
    except TypeError as e:
        raise InputError(f"{path}: the saved model config does not fit this code: {e}") from None
    model = build(m, moe, obj["vocab_size"], 0)
    load_weights(model, obj["state"], path)
    model.eval()
    return model, m, moe, obj
