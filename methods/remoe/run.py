"""DAG steps that run the model: pre-training, gate-only fine-tuning, routing traces."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from methods.core.results import InputError, atomic_path
from methods.core.train import train
from methods.remoe.config import FinetuneSection, HubConfig, PretrainConfig, TraceConfig, Variant

from . import data as D, losses as Lo, model as M


@dataclass
class FinetuneConfig(FinetuneSection):
    """The `finetune` section plus the variant's loss switches and the seed (batch order; the
    workflow merges both in), and at paper scale the `hub` section (data, grad_accum)."""
    variant: Variant
    seed: int
    hub: HubConfig | None = None


@dataclass
class TraceStep(TraceConfig):
    """The `trace` section, and at paper scale the `hub` section (seq_len)."""
    hub: HubConfig | None = None


def _batch_fn(ids: np.ndarray, batch_size: int, seed: int):
    t = torch.from_numpy(ids.astype(np.int64))

    def fn(step: int) -> dict:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        rows = torch.randint(0, t.shape[0], (batch_size,), generator=g)
        b = t[rows]
        return {"input_ids": b[:, :-1], "labels": b[:, 1:], "step": step}
    return fn


def _ce(logits, labels):
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def _layer_terms(logp, idx, ref_logp, v: Variant, cfg: FinetuneConfig, w: dict) -> dict:
    """One MoE layer's locality terms (if on) and trust term (if λ_KL > 0); the per-layer losses
    are averaged over layers by `_combine` [I]."""
    parts = {}
    if v.locality:
        parts = Lo.locality(logp, idx, w, cfg.lags, cfg.window, cfg.sym_half)
    if v.lambda_kl > 0:
        parts["trust"] = Lo.trust(logp, ref_logp)
    return parts


def _combine(loss, layers: list[dict], v: Variant, alpha: float, stats: dict):
    """L = L_CE + α_t · mean_layers L_Loc + λ_KL · mean_layers L_Trust; the terms into `stats`."""
    if v.locality:
        loss = loss + alpha * torch.stack([p["loc"] for p in layers]).mean()
    if v.lambda_kl > 0:
        loss = loss + v.lambda_kl * torch.stack([p["trust"] for p in layers]).mean()
    stats.update({k: float(torch.stack([p[k].detach() for p in layers]).mean()) for k in layers[0]})
    return loss


def pretrain(cfg: PretrainConfig, data_path: str, out: str, log: str) -> dict:
    if cfg.hub_id is not None:  # paper scale: the released MoE's routers are the base
        from methods.core.results import write_jsonl

        from . import hub

        res = hub.pretrain(cfg.hub_id, out)
        write_jsonl(log, [{"step": 0, **res}])  # nothing trained: the record of what was loaded
        return res
    d = D.load(data_path)
    vocab = len(str(d["vocab"]))
    model = M.build(cfg.model, cfg.moe, vocab, cfg.seed)
    coef = cfg.moe.aux_coef

    def loss_fn(model, batch):
        logits = model(input_ids=batch["input_ids"]).logits
        aux = torch.stack([f.last.aux_loss for f in M.ffns(model)]).mean()
        return _ce(logits, batch["labels"]) + coef * aux

    rows = train(model, _batch_fn(d["train_ids"], cfg.train.batch_size, cfg.seed), cfg.train,
                 loss_fn=loss_fn, log_path=log, desc="pretrain")
    M.save(model, cfg.model, cfg.moe, vocab, out, {"variant": "base"})
    return {"final_loss": rows[-1]["loss"]}


def finetune(cfg: FinetuneConfig, base: str, data_path: str, out: str, log: str) -> dict:
    if cfg.hub is not None:  # paper scale: the hub MoE's routers, on the hub conversations
        from . import hub

        return hub.finetune(cfg, base, data_path, out, log)
    d = D.load(data_path)
    model, mcfg, moe, obj = M.load(base)
    model.train()
    M.attach_reference(model)
    names = M.gate_only(model)
    v = cfg.variant
    w = {"reuse": cfg.lambda_reuse, "smooth": cfg.lambda_smooth, "lag": cfg.lambda_lag,
         "ws": cfg.lambda_ws}
    t_warm = max(1.0, cfg.warm_frac * cfg.train.steps)
    K = moe.k
    stats: dict = {}

    def loss_fn(model, batch):
        B, S = batch["input_ids"].shape
        logits = model(input_ids=batch["input_ids"]).logits
        loss = _ce(logits, batch["labels"])  # load balancing off (as in the paper, per the note)
        if not v.locality and v.lambda_kl == 0:
            return loss
        alpha = min(1.0, batch["step"] / t_warm)
        layers = []
        for f in M.ffns(model):
            logp = F.log_softmax(f.last.router_logits.float(), -1).reshape(B, S, -1)
            idx = f.last.topk_idx.reshape(B, S, K)
            ref = f.ref_logp.reshape(B, S, -1) if v.lambda_kl > 0 else None
            layers.append(_layer_terms(logp, idx, ref, v, cfg, w))
        return _combine(loss, layers, v, alpha, stats)

    rows = train(model, _batch_fn(d["train_ids"], cfg.train.batch_size, cfg.seed + 1), cfg.train,
                 loss_fn=loss_fn, log_path=log, desc=f"finetune {v.name}")
    base_state = obj["state"]
    changed = sorted(n for n, p in model.state_dict().items()
                     if not torch.equal(p, base_state[n]))
    M.save(model, mcfg, moe, obj["vocab_size"], out, {"variant": v.name, "seed": cfg.seed, "trainable": names})
    return {"final_loss": rows[-1]["loss"], "last_terms": stats, "changed": changed}


def trace(cfg: TraceStep, ckpts: list[str], data_path: str, out_dir: str) -> dict:
    """Per checkpoint: top-K sets (n_docs, L, S, K), expert load counts, held-out loss; written
    to <variant>.npz (the base) or <variant>_s<seed>.npz (a fine-tune)."""
    if getattr(cfg, "hub", None) is not None:  # paper scale: gate files of a hub MoE
        from . import hub

        return hub.trace(cfg, ckpts, data_path, out_dir)
    d = D.load(data_path)
    ids = torch.from_numpy(d["eval_ids"][:cfg.n_docs].astype(np.int64))
    if ids.shape[0] < cfg.n_docs:
        raise InputError(f"config key 'trace.n_docs': {cfg.n_docs} > {ids.shape[0]} eval documents")
    res = {}
    for path in ckpts:
        model, mcfg, moe, obj = M.load(path)
        meta = obj["meta"]
        name = meta["variant"] if "seed" not in meta else f"{meta['variant']}_s{meta['seed']}"
        sets, probs, nll, n = [], [], 0.0, 0
        with torch.no_grad():
            for s in range(0, ids.shape[0], cfg.batch_size):
                b = ids[s:s + cfg.batch_size]
                B, S = b.shape[0], b.shape[1] - 1
                logits = model(input_ids=b[:, :-1]).logits
                nll += float(F.cross_entropy(logits.float().flatten(0, 1), b[:, 1:].flatten(),
                                             reduction="sum"))
                n += B * S
                sets.append(torch.stack([f.last.topk_idx.reshape(B, S, -1) for f in M.ffns(model)], 1))
                probs.append(torch.stack([f.last.router_probs.float().reshape(B, S, -1)
                                          for f in M.ffns(model)], 1))
        topk = torch.cat(sets).numpy().astype(np.int16)
        p = torch.cat(probs)
        mean_p = p.mean((0, 2)).numpy()  # (L, E) mean router probability
        ppl = math.exp(nll / n)
        with atomic_path(Path(out_dir) / f"{name}.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, topk=topk, mean_probs=mean_p, ppl=ppl,
                                    n_experts=moe.n_experts, dom=d["eval_dom"][:cfg.n_docs, 1:])
        res[name] = ppl
    return res
