"""Block-wise PTQ of a Llama-style HF model (OmniQuant-style block reconstruction)
and LFQ's final block (arXiv 2605.29756; objective as quoted by a third-party note, NV).

Sequential over blocks l = 1…L: FP targets Y_l = block_l(X_l^FP) on FP inputs; the quantized
block sees X_l^Q, the outputs of the already-quantized blocks; then X_{l+1}^Q = Q-block_l(X_l^Q)
and X_{l+1}^FP = Y_l. Per block, the baseline is one of
  rtn   — round-to-nearest of every linear (γ = β = +∞, no data);
  gptq  — GPTQ per linear on H = 2XXᵀ of that linear's inputs in the block fed X_l^Q (gptq.py);
  omni  — OmniQuant LWC: γ, β of every linear trained by MSE(Q-block(X^Q), Y), AdamW wd 0.
`final_block` re-quantizes the LAST block of a baseline model with LWC under another objective:
  mse     — OmniQuant's own (used by `omni` itself);
  headmse — MSE between logits W_head·norm(·) of the Q and FP block outputs (ablation "+head");
  lfq     — soft cross-entropy −Σ softmax(z^FP)·log_softmax(z^Q) (LFQ),
with the final norm and LM head frozen and never quantized; embeddings stay FP throughout.
The vocab-sized logits are built and back-propagated ≤ `chunk` tokens at a time.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import QuantSection, Setting
from .gptq import gptq_quantize
from .quantizer import LWCLinear, rtn

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
BASELINES = ("rtn", "gptq", "omni")
OBJECTIVES = ("mse", "headmse", "lfq")


@dataclass
class QuantConfig(QuantSection, Setting):
    """The `quant` section plus one setting's bits and group size (the workflow merges them in)."""


def _sub(module: nn.Module, dotted: str) -> nn.Module:
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _set_sub(module: nn.Module, dotted: str, new: nn.Module) -> None:
    parent, _, name = dotted.rpartition(".")
    setattr(_sub(module, parent) if parent else module, name, new)


def position_embeddings(model, x):
    pos = torch.arange(x.shape[1]).unsqueeze(0)
    return model.model.rotary_emb(x, position_ids=pos)


@torch.no_grad()
def run_block(block, x, pe, batch):
    """Block outputs for every sequence of x [n, T, d] (causal attention: no mask needed)."""
    return torch.cat([block(x[i:i + batch], position_embeddings=pe) for i in range(0, len(x), batch)])


@torch.no_grad()
def block_input(model, ids, layer: int, batch: int):
    """Hidden states entering block `layer` (hidden_states[layer] of the HF forward)."""
    return torch.cat([model(input_ids=ids[i:i + batch], output_hidden_states=True).hidden_states[layer]
                      for i in range(0, len(ids), batch)])


def soft_ce(logits_q, logits_fp):
    """LFQ's objective, summed over tokens: −Σ_t Σ_v softmax(z^FP)_tv · log_softmax(z^Q)_tv
    (= KL(p_FP‖p_Q) + H(p_FP) per token; H does not depend on the quantizer)."""
    return -(F.softmax(logits_fp.float(), -1) * F.log_softmax(logits_q.float(), -1)).sum()


def _head_loss(objective, y_q, y_fp, norm, head, chunk):
    """Backpropagate the logit objective from y_q [T, d] in chunks; return its value
    (mean over tokens for lfq, over logits for headmse). Chunk logits are freed after each
    backward, so memory is O(chunk · vocab) whatever T is."""
    t = y_q.shape[0]
    total = 0.0
    for c in range(0, t, chunk):
        zq = head(norm(y_q[c:c + chunk]))
        with torch.no_grad():
            zf = head(norm(y_fp[c:c + chunk]))
        if objective == "lfq":
            loss = soft_ce(zq, zf) / t
        else:
            loss = F.mse_loss(zq.float(), zf.float(), reduction="sum") / (t * zq.shape[-1])
        loss.backward()
        total += float(loss.detach())
    return total


def train_lwc(block, x_q, y_fp, pe, cfg: QuantConfig, objective="mse", norm=None, head=None):
    """Replace the block's linears by LWCLinear and train γ, β on (x_q → y_fp); return the
    block (LWC modules still in place) and the last epoch's mean loss."""
    for name in LINEARS:
        _set_sub(block, name, LWCLinear(_sub(block, name), cfg.bits, cfg.group_size))
    for p in block.parameters():
        p.requires_grad_(False)
    params = [p for m in block.modules() if isinstance(m, LWCLinear) for p in (m.gamma, m.beta)]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed)
    last = float("nan")
    for _ in range(cfg.epochs):
        perm, losses = torch.randperm(len(x_q), generator=gen), []
        for i in range(0, len(x_q), cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            opt.zero_grad(set_to_none=True)
            out = block(x_q[idx], position_embeddings=pe)
            if objective == "mse":
                loss = F.mse_loss(out, y_fp[idx])
                loss.backward()
                losses.append(float(loss.detach()))
            else:
                y = out.detach().requires_grad_(True)
                losses.append(_head_loss(objective, y.flatten(0, 1), y_fp[idx].flatten(0, 1), norm, head, cfg.chunk))
                out.backward(y.grad)
            opt.step()
        last = sum(losses) / len(losses)
    return block, last


def _finalize(block, records: dict, prefix: str, quantized: dict) -> None:
    """Write Ŵ = dequant(codes, fp16 scale, zero) into plain nn.Linear modules of `block` and
    keep (codes, scale, zero) for packing: the saved model and the packed file then hold the
    same numbers (the fp16 scale moves Ŵ by < 2⁻¹¹ relative from the fp32 one used in training)."""
    from kernels import quant as kq

    for name in LINEARS:
        c, h, z = quantized[name]
        h16 = h.float().half()
        w_hat = kq.dequantize(c, h16.float(), z.float(), c.shape[1] // h.shape[1])
        old = _sub(block, name)
        lin = nn.Linear(w_hat.shape[1], w_hat.shape[0], bias=False)
        lin.weight.data.copy_(w_hat)
        if getattr(old, "bias", None) is not None:
            lin.bias = nn.Parameter(old.bias.detach().clone())
        _set_sub(block, name, lin)
        records[f"{prefix}.{name}"] = (c, h16, z)


def _gptq_block(block, x_q, pe, cfg):
    hessians, counts, hooks = {}, {}, []

    def hook(name):
        def f(_, inp, __):
            a = inp[0].detach().double().flatten(0, -2)
            hessians[name] = hessians.get(name, 0) + 2 * a.t() @ a
            counts[name] = counts.get(name, 0) + a.shape[0]
        return f

    for name in LINEARS:
        hooks.append(_sub(block, name).register_forward_hook(hook(name)))
    run_block(block, x_q, pe, cfg.forward_batch)
    for h in hooks:
        h.remove()
    return {name: gptq_quantize(_sub(block, name).weight, hessians[name] / counts[name], cfg.bits,
                                cfg.group_size, cfg.gptq_block_size, cfg.gptq_percdamp, cfg.gptq_act_order)
            for name in LINEARS}


def quantize_model(model, ids, method: str, cfg: QuantConfig, in_place: bool = False):
    """Block-wise PTQ of a copy of `model`; returns (qmodel, records, per-block log).

    With `in_place`, `model` itself becomes the quantized model: each FP block is needed only
    until its own output is computed, so the step holds one extra block instead of a second
    model (a 7B model in fp32 is 30 GB). The result is the same (tested)."""
    if method not in BASELINES:
        raise ValueError(f"unknown baseline {method!r} (one of {BASELINES})")
    qmodel = model if in_place else copy.deepcopy(model)
    for p in list(model.parameters()) + list(qmodel.parameters()):
        p.requires_grad_(False)
    x_fp = block_input(model, ids, 0, cfg.forward_batch)
    x_q = x_fp.clone()
    pe = position_embeddings(model, x_fp)
    records, log = {}, []
    for layer, fp_block in enumerate(list(model.model.layers)):
        y_fp = run_block(fp_block, x_fp, pe, cfg.forward_batch)
        block = copy.deepcopy(fp_block)
        entry = {"layer": layer}
        if method == "rtn":
            quantized = {n: rtn(_sub(block, n).weight.detach(), cfg.bits, cfg.group_size) for n in LINEARS}
        elif method == "gptq":
            quantized = _gptq_block(block, x_q, pe, cfg)
        else:
            with torch.enable_grad():
                block, entry["train_mse"] = train_lwc(block, x_q, y_fp, pe, cfg)
            quantized = {n: _sub(block, n).export() for n in LINEARS}
        _finalize(block, records, f"model.layers.{layer}", quantized)
        x_q = run_block(block, x_q, pe, cfg.forward_batch)
        entry["block_out_mse"] = float(F.mse_loss(x_q, y_fp))
        log.append(entry)
        qmodel.model.layers[layer] = block
        x_fp = y_fp
    return qmodel, records, log


def final_block(model, base_qmodel, ids, objective: str, cfg: QuantConfig, in_place: bool = False):
    """LFQ: the base model's blocks 1…L−1 unchanged, block L re-quantized from its FP
    weights by LWC under `objective`. Returns (qmodel, records of block L, log); with
    `in_place`, `base_qmodel` itself gets the new block (no copy of the whole model)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown final-block objective {objective!r} (one of {OBJECTIVES})")
    last = len(model.model.layers) - 1
    qmodel = base_qmodel if in_place else copy.deepcopy(base_qmodel)
    for p in list(model.parameters()) + list(qmodel.parameters()):
        p.requires_grad_(False)
    x_fp = block_input(model, ids, last, cfg.forward_batch)
    x_q = block_input(base_qmodel, ids, last, cfg.forward_batch)
    pe = position_embeddings(model, x_fp)
    fp_block = model.model.layers[last]
    y_fp = run_block(fp_block, x_fp, pe, cfg.forward_batch)
    with torch.enable_grad():
        block, loss = train_lwc(copy.deepcopy(fp_block), x_q, y_fp, pe, cfg, objective,
                                model.model.norm, model.lm_head)
    records = {}
    _finalize(block, records, f"model.layers.{last}", {n: _sub(block, n).export() for n in LINEARS})
    qmodel.model.layers[last] = block
    out = run_block(block, x_q, pe, cfg.forward_batch)
    return qmodel, records, {"layer": last, "objective": objective, "train_loss": loss,
                             "block_out_mse": float(F.mse_loss(out, y_fp))}
