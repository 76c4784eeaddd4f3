"""Train one judge variant (per seed), then evaluate it (ID / Bias Suite / adversarial, by
language) and probe its robust channel (dCor(z_r, z_b), linear probe of the MT tag) — one
process per variant so torch is imported once."""
from __future__ import annotations

import math
import random
import time
import typing
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from methods.core.results import InputError, read_json, read_jsonl

from .config import RunConfig, Variant
from .model import Judge, dis_loss, distance_correlation, soft_labels, standardise, wasserstein_1d

VARIANTS = typing.get_args(Variant)


class Vocab:
    def __init__(self, words):
        self.ix = {w: i for i, w in enumerate(words)}

    def encode(self, prompt, resp, max_len):
        """ids of [prompt ; <sep> ; response] and segments: 0 prompt, then per response token
        1 if it occurs in the prompt else 2 (exact-match feature)."""
        p = [self.ix[t] for t in prompt.split()] + [1]
        r = [self.ix[t] for t in resp.split()]
        seen = set(p)
        ids = (p + r)[:max_len]
        return ids, ([0] * len(p) + [1 if t in seen else 2 for t in r])[:max_len]


def collate(items):
    n = max(len(i) for i, _ in items)
    ids = torch.zeros(len(items), n, dtype=torch.long)
    seg = torch.zeros(len(items), n, dtype=torch.long)
    for k, (i, s) in enumerate(items):
        ids[k, :len(i)] = torch.tensor(i); seg[k, :len(s)] = torch.tensor(s)
    return ids, seg


def encode_pairs(rows, vocab, max_len):
    """Sequences of all A responses then all B responses; better index; proxy bins."""
    items = [vocab.encode(r["prompt"], r[k]["text"], max_len) for k in ("a", "b") for r in rows]
    return items


def lam(step, cfg):
    w = max(1, int(cfg.warmup_frac * cfg.steps))
    return min(1.0, (step + 1) / w)


def lr_factor(step, warm, steps):
    """Linear warm-up over `warm` steps, then cosine to 0 at `steps`."""
    return step / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


def step_loss(out, rows, step, cfg: RunConfig, variant, dib, bottleneck, n_bins, ema, qr, qb):
    """One training step's objective (the same at every scale): Bradley-Terry on the two
    responses' scores (the batch's A responses then its B responses), plus for DIBJudge
    λ_comp·KL (VIB) or VQ commitment, λ_bias·(0.5·EMA-weighted proxy losses + 0.5·low-level
    reconstruction) and λ_dis·L_dis with the FIFO queue. Returns (loss, log record, queues);
    `ema` (proxy → running loss magnitude) is updated in place."""
    B = len(rows)
    s = out["score"]
    label = torch.tensor([r["label"] for r in rows], device=s.device)
    sa, sb = s[:B], s[B:]
    margin = torch.where(label == 0, sa - sb, sb - sa)
    loss = F.softplus(-margin).mean()  # Bradley-Terry: −log σ(r_better − r_worse)
    rec = {"step": step, "lm": float(loss.detach())}
    if dib:
        lt = lam(step, cfg)
        comp = out["comp"].mean()
        kl_w = cfg.kl_weight if bottleneck == "vib" else cfg.vq_weight
        loss = loss + cfg.lam_comp * lt * kl_w * comp
        rec["comp"] = float(comp.detach())
        if variant != "no_proxy":
            bins = {k: torch.tensor([r[x]["proxy"][k] for x in ("a", "b") for r in rows], device=s.device)
                    for k in ema}
            pl = {k: wasserstein_1d(out["proxy"][k], soft_labels(bins[k], n_bins[k])) for k in ema}
            for k, v in pl.items():
                v = float(v.detach()); ema[k] = v if ema[k] is None else cfg.ema_decay * ema[k] + (1 - cfg.ema_decay) * v
            inv = {k: 1.0 / max(ema[k], 1e-6) for k in ema}
            z = sum(inv.values()) / len(inv)
            proxy = sum(inv[k] / z * pl[k] for k in pl)  # EMA inverse-magnitude weights, mean 1
            # targets z-scored over the batch (comparable scales; the official code regresses the
            # raw statistics): exact z-scores, constant columns → 0 (model.standardise)
            lowrec = F.mse_loss(out["recon"], standardise(out["recon_target"]))
            loss = loss + cfg.lam_bias * lt * (0.5 * proxy + 0.5 * lowrec)
            rec.update(proxy=float(proxy.detach()), lowrec=float(lowrec.detach()))
        if variant != "no_dis":
            ld = dis_loss(out["zr"], out["zb"], cfg.dis_c, qr, qb)
            loss = loss + cfg.lam_dis * lt * ld
            rec["dis"] = float(ld.detach())
            qr = out["zr"].detach() if qr is None else torch.cat([out["zr"].detach(), qr])[:cfg.queue]
            qb = out["zb"].detach() if qb is None else torch.cat([out["zb"].detach(), qb])[:cfg.queue]
    return loss, rec, qr, qb


def train_variant(cfg: RunConfig, variant: str, data_dir: str, seed: int, log: list):
    meta = read_json(Path(data_dir) / "meta.json")
    vocab = Vocab(meta["vocab"])
    train = read_jsonl(Path(data_dir) / "train.jsonl")
    torch.manual_seed(seed)
    model = Judge(len(meta["vocab"]), cfg.model, variant, meta["n_bins"])
    aux = [p for n, p in model.named_parameters() if n.split(".")[0] in ("bias", "proxy", "recon")]
    main = [p for n, p in model.named_parameters() if n.split(".")[0] not in ("bias", "proxy", "recon")]
    opt = torch.optim.AdamW([{"params": main, "lr": cfg.lr}, {"params": aux, "lr": cfg.lr_heads}],
                            weight_decay=cfg.weight_decay)
    base = [g["lr"] for g in opt.param_groups]
    warm = max(1, int(cfg.warmup_frac * cfg.steps))
    ema = {k: None for k in meta["n_bins"]}
    qr = qb = None
    for step in range(cfg.steps):
        f = lr_factor(step, warm, cfg.steps)
        for g, b in zip(opt.param_groups, base):
            g["lr"] = b * f
        rng = random.Random(seed * 1_000_003 + step)  # batches are functions of (seed, step)
        rows = [train[rng.randrange(len(train))] for _ in range(cfg.batch_size)]
        ids, seg = collate(encode_pairs(rows, vocab, cfg.model.max_len))
        out = model(ids, seg)
        loss, rec, qr, qb = step_loss(out, rows, step, cfg, variant, model.dib,
                                      getattr(model, "bottleneck", None), meta["n_bins"], ema, qr, qb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        if step % 50 == 0 or step == cfg.steps - 1:
            rec["loss"] = float(loss.detach())
            log.append({"seed": seed, **rec})
    return model, vocab


@torch.no_grad()
def score_rows(model, vocab, rows, cfg):
    """Per pair: the two scores, pooled z_r (and z_b) of both responses. A hub judge
    (methods.dibjudge.hub) scores with its own tokenizer."""
    if hasattr(model, "score_rows"):
        return model.score_rows(rows, cfg)
    model.eval()
    outs = {"score": [], "zr": [], "zb": []}
    for i in range(0, len(rows), cfg.eval_batch):
        chunk = rows[i:i + cfg.eval_batch]
        o = model(*collate(encode_pairs(chunk, vocab, cfg.model.max_len)))
        n = len(chunk)
        outs["score"].append(torch.stack([o["score"][:n], o["score"][n:]], 1))
        outs["zr"].append(torch.stack([o["zr"][:n], o["zr"][n:]], 1))
        if "zb" in o:
            outs["zb"].append(torch.stack([o["zb"][:n], o["zb"][n:]], 1))
    return {k: torch.cat(v) for k, v in outs.items() if v}


def evaluate(model, vocab, data_dir, cfg, seed):
    """Accuracy by language (ID, adversarial), MT-preference rate p_MT on the Bias Suite, and
    dCor / probe on the Bias Suite's responses (both styles, equal quality)."""
    m = {}
    for split in ("id", "adv", "bias"):
        rows = read_jsonl(Path(data_dir) / f"{split}.jsonl")
        o = score_rows(model, vocab, rows, cfg)
        pred_b = (o["score"][:, 1] > o["score"][:, 0]).long()
        for lang in sorted({r["lang"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["lang"] == lang]
            hit = [int(pred_b[i]) == rows[i]["label"] for i in idx]
            key = "p_mt" if split == "bias" else f"{split}_acc"  # bias label = the MT response
            m[f"{key}_{lang}"] = float(np.mean(hit))
        if split == "bias":
            style = torch.tensor([[r["a"]["style"] == "mt", r["b"]["style"] == "mt"] for r in rows]).reshape(-1)
            zr = o["zr"].reshape(len(style), -1)
            g = torch.Generator().manual_seed(seed)
            sel = torch.randperm(len(style), generator=g)[:cfg.probe_n]
            m["probe_acc"] = probe_accuracy(zr[sel].numpy(), style[sel].numpy(), seed)
            m["dcor"] = (distance_correlation(zr[sel], o["zb"].reshape(len(style), -1)[sel])
                         if "zb" in o else None)
    return m


def probe_accuracy(x, y, seed):
    """Held-out accuracy (50/50 split) of a logistic-regression probe of the MT tag."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    tr, te = perm[: len(y) // 2], perm[len(y) // 2:]
    sc = StandardScaler().fit(x[tr])
    clf = LogisticRegression(max_iter=2000).fit(sc.transform(x[tr]), y[tr])
    return float(clf.score(sc.transform(x[te]), y[te]))


def run_variant(cfg: RunConfig, variant: str, data_dir: str, ckpt_dir: str | None = None) -> dict:
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    if cfg.hub.judge:   # paper scale: LoRA judge on the hub LM, hub encoder (methods.dibjudge.hub)
        from .hub import train_hub_variant as train
    else:
        train = train_variant
    per_seed, log = {}, []
    for seed in cfg.seeds:
        t0 = time.perf_counter()
        model, vocab = train(cfg, variant, data_dir, seed, log)
        per_seed[seed] = {**evaluate(model, vocab, data_dir, cfg, seed), "train_s": time.perf_counter() - t0}
        if ckpt_dir:
            Path(ckpt_dir).mkdir(parents=True, exist_ok=True)
            state = model.trainable_state() if hasattr(model, "trainable_state") else model.state_dict()
            torch.save(state, Path(ckpt_dir) / f"{variant}_s{seed}.pt")
    keys = per_seed[cfg.seeds[0]].keys()
    mean = {k: (None if any(per_seed[s][k] is None for s in per_seed)
                else float(np.mean([per_seed[s][k] for s in per_seed]))) for k in keys}
    return {"variant": variant, "mean": mean, "per_seed": {str(k): v for k, v in per_seed.items()}, "log": log}
