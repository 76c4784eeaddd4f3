"""The tiny fusion model, its training under mixture weightings, calibrated modality masking,
decision-level PID, the vision-masking intervention and PID-guided reweighting."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .config import PIDConfig, ReweightConfig, TrainConfig
from .estimators import batch_pid, batch_pid_avg, conditional_pid
from .synth import AUD_VOCAB, FAMILIES, IMG_VOCAB, N_CLASSES, TXT_VOCAB, av_question

MODS = {"vl": ("img", "txt"), "av": ("img", "aud", "txt")}
VOCAB = {"img": IMG_VOCAB, "txt": TXT_VOCAB, "aud": AUD_VOCAB}
# the two sources of each PID, the modalities `decisions` masks one at a time (the omni model's
# text is the Sensory PID's control variable, never masked)
MASKED = {"vl": ("img", "txt"), "av": ("img", "aud")}


class Fusion(nn.Module):
    """Token embeddings per modality (4 tokens each), concatenated, then an MLP classifier over
    the 4 options. `masks` maps a modality to its calibrated (mu, sigma): its embeddings are
    replaced by Gaussian draws with those per-dimension statistics (the paper's calibrated
    embedding masking, as described by a third-party note, NV)."""

    def __init__(self, mods, d: int, hidden: int, jitter: float):
        super().__init__()
        self.mods, self.jitter = tuple(mods), jitter
        self.emb = nn.ModuleDict({m: nn.Embedding(VOCAB[m], d) for m in self.mods})
        self.body = nn.Sequential(nn.Linear(4 * d * len(self.mods), hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, N_CLASSES)

    def embed(self, batch):
        return {m: self.emb[m](torch.as_tensor(batch[m])) for m in self.mods}

    def forward(self, batch, masks=None, gen=None):
        e = self.embed(batch)
        parts = []
        for m in self.mods:
            x = e[m]
            if self.training and m != "txt" and self.jitter > 0:
                x = x + self.jitter * torch.randn(x.shape, generator=gen)
            if masks and m in masks:
                mu, sd = masks[m]
                x = mu + sd * torch.randn(x.shape, generator=gen)
            parts.append(x.flatten(1))
        return self.head(self.body(torch.cat(parts, 1)))


def emb_stats(model, batch):
    """Per-dimension (mu, sigma) of each modality's token embeddings on a profiling batch."""
    with torch.no_grad():
        e = model.embed(batch)
    return {m: (x.reshape(-1, x.shape[-1]).mean(0), x.reshape(-1, x.shape[-1]).std(0)) for m, x in e.items()}


def subset(d: dict, idx) -> dict:
    return {k: v[idx] for k, v in d.items()}


def train_mix(cfg: TrainConfig, data: dict, mix: str, seed: int) -> dict:
    """Train one model with training seed `seed` (initialisation, batches, jitter, modality
    dropout); returns {checkpoint name: state_dict}. Mixture weights reweight the
    family-balanced pool by sampling; with probability mask_prob one of the two PID sources of an
    item (MASKED) is replaced by calibrated noise (modality dropout, so the masked conditionals
    that `decisions` reads are in-distribution)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    if mix == "omni":
        pool, mods = data["av_train"], MODS["av"]
        probs = np.full(len(pool["y"]), 1.0 / len(pool["y"]))
    else:
        pool, mods = data["train"], MODS["vl"]
        w = np.asarray(cfg.mixes[mix], float)[pool["fam"]]
        probs = w / w.sum()
    model = Fusion(mods, cfg.d, cfg.hidden, cfg.jitter)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    at = {max(1, round(f * cfg.steps)): name for name, f in cfg.checkpoints.items()}
    out = {}
    for step in range(1, cfg.steps + 1):
        idx = rng.choice(len(probs), size=cfg.batch_size, p=probs)
        b = subset(pool, idx)
        model.train()
        stats = emb_stats(model, b)
        stats = {m: (mu.detach(), sd.detach()) for m, (mu, sd) in stats.items()}
        logits_full = model(b, gen=gen)
        loss = nn.functional.cross_entropy(logits_full, torch.as_tensor(b["y"]), reduction="none")
        if cfg.mask_prob > 0:
            for m in MASKED["av" if mix == "omni" else "vl"]:
                sel = rng.random(cfg.batch_size) < cfg.mask_prob / 2
                if sel.any():
                    lm = model(subset(b, np.flatnonzero(sel)), masks={m: stats[m]}, gen=gen)
                    loss = torch.cat([loss, nn.functional.cross_entropy(
                        lm, torch.as_tensor(b["y"][sel]), reduction="none")])
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
        if step in at:
            out[at[step]] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return out


def load(cfg: TrainConfig, state, omni: bool, source="the models file") -> Fusion:
    from methods.core.safeload import load_weights

    m = Fusion(MODS["av" if omni else "vl"], cfg.d, cfg.hidden, cfg.jitter)
    load_weights(m, state, source)
    m.eval()
    return m


def probs(model, batch, masks=None, seed=0):
    with torch.no_grad():
        return torch.softmax(model(batch, masks=masks, gen=torch.Generator().manual_seed(seed)), -1).numpy()


def onehot(tokens, vocab):
    """Source features for BATCH: the modality's tokens one-hot, concatenated (slot-wise codebooks
    make this the lossless version of the paper's mean-pooled embeddings)."""
    return np.eye(vocab)[tokens].reshape(len(tokens), -1)


def decisions(cfg: TrainConfig, model, profile: dict, test: dict, omni: bool) -> dict:
    """Model-induced conditionals on the test items via calibrated masking, and accuracies."""
    stats = emb_stats(model, profile)
    y = test["y"]
    if omni:
        p_full = probs(model, test)
        p_v = probs(model, test, {"aud": stats["aud"]}, 1)       # p(y | v, t)
        p_a = probs(model, test, {"img": stats["img"]}, 2)       # p(y | a, t)
        return {"p_full": p_full, "p_1": p_v, "p_2": p_a,
                "acc": float((p_full.argmax(1) == y).mean()), "acc_no_vision": float((p_a.argmax(1) == y).mean())}
    p_full = probs(model, test)
    p_v = probs(model, test, {"txt": stats["txt"]}, 1)           # p(y | x_v)
    p_t = probs(model, test, {"img": stats["img"]}, 2)           # p(y | x_t)
    acc = float((p_full.argmax(1) == y).mean())
    acc_nv = float((p_t.argmax(1) == y).mean())
    fam_acc = {f: float((p_full.argmax(1) == y)[test["fam"] == k].mean()) for k, f in enumerate(FAMILIES)}
    return {"p_full": p_full, "p_1": p_v, "p_2": p_t, "acc": acc, "acc_no_vision": acc_nv,
            "delta_vision": acc - acc_nv, "family_acc": fam_acc}


def _kw(pc: PIDConfig) -> dict:
    return dict(batch_size=pc.batch_size, n_batches=pc.n_batches, seed=pc.seed, epochs=pc.epochs,
                lr=pc.lr, sinkhorn_iters=pc.sinkhorn_iters, sinkhorn_tol=pc.sinkhorn_tol)


def pid_of(pc: PIDConfig, dec: dict, test: dict, omni: bool, families: bool = True) -> dict:
    """Decision-level PID (bits): pooled over the test set and per task family; for the omni model
    the Sensory PID I(Y; V, A | T) on AV-fusion items, T = the text's question (the instruction
    that, with V and A, determines the answer; synth.av_items), one BATCH estimate per question."""
    f1 = onehot(test["img"], IMG_VOCAB)
    if omni:
        m = test["fusion"]
        f2 = onehot(test["aud"], AUD_VOCAB)
        t = av_question(test)[m]
        kw = {**_kw(pc), "n_batches": max(1, pc.n_batches // len(np.unique(t)))}
        r = conditional_pid(t, f1[m], f2[m], dec["p_1"][m], dec["p_2"][m], dec["p_full"][m], **kw)
        return {"sensory": {"U_vis": r["U1"], "U_aud": r["U2"], "R_sens": r["R"], "S_av": r["S"], "I": r["I"]}}
    f2 = onehot(test["txt"], TXT_VOCAB)

    def one(mask):
        r = batch_pid_avg(f1[mask], f2[mask], dec["p_1"][mask], dec["p_2"][mask], dec["p_full"][mask], **_kw(pc))
        return {"R": r["R"], "U_vis": r["U1"], "U_txt": r["U2"], "S": r["S"], "I": r["I"]}

    out = {"pooled": one(np.ones(len(test["y"]), bool))}
    if families:
        out["families"] = {f: one(test["fam"] == k) for k, f in enumerate(FAMILIES)}
    return out


def pid_of_features(pc: PIDConfig, dec: dict) -> dict:
    """Paper scale: the decision-level PID (bits) of one hub model on one benchmark's test items,
    BATCH on the mean-pooled image features (f_1) and text-span embeddings (f_2)."""
    r = batch_pid_avg(dec["f_1"], dec["f_2"], dec["p_1"], dec["p_2"], dec["p_full"], **_kw(pc))
    return {"pooled": {"R": r["R"], "U_vis": r["U1"], "U_txt": r["U2"], "S": r["S"], "I": r["I"]}}


def pid_scores(pc: PIDConfig, model, profile, items) -> dict:
    """Per-sample SR, SC, FP and GapScore (the paper's per-sample scores, via a
    third-party note, NV) from BATCH local atoms: one coupling trained over all the items'
    batches, local atoms of every item."""
    stats = emb_stats(model, profile)
    p12 = probs(model, items)
    p1 = probs(model, items, {"txt": stats["txt"]}, 1)
    p2 = probs(model, items, {"img": stats["img"]}, 2)
    f1, f2 = onehot(items["img"], IMG_VOCAB), onehot(items["txt"], TXT_VOCAB)
    return scores_from(pc, f1, f2, p1, p2, p12)


def scores_from(pc: PIDConfig, f1, f2, p1, p2, p12) -> dict:
    """SR, SC, FP and GapScore per item from its features and its three conditionals (p1 = p(y|x_v),
    p2 = p(y|x_t), p12 = p(y|x_v, x_t)); the paper-scale reweighting calls it on a hub model's decisions."""
    r = batch_pid(f1, f2, p1, p2, p12, batch_size=pc.batch_size, epochs=pc.epochs, lr=pc.lr,
                  sinkhorn_iters=pc.sinkhorn_iters, sinkhorn_tol=pc.sinkhorn_tol, seed=pc.seed)
    loc = r["local"]          # every item, in order (no n_batches cap)
    eps = 1e-6
    ipos = sum(np.clip(loc[k], 0, None) for k in ("S", "U1", "U2", "R"))
    sr = np.clip(loc["S"], 0, None) / (ipos + eps)
    sc = np.clip(loc["U2"], 0, None) / (ipos + eps)
    h = lambda p: -(p * np.log2(np.clip(p, 1e-12, 1))).sum(1)  # noqa: E731
    fp = np.clip(np.minimum(h(p1), h(p2)) - h(p12), 0, None)
    return {"SR": sr, "SC": sc, "FP": fp, "gap": (1 - sr) * (1 - sc) * fp}


def weights_from(sc: dict, rc: ReweightConfig) -> np.ndarray:
    """Top-K GapScore items get gap_weight, top-K shortcut items (SC ≥ tau) shortcut_weight."""
    w = np.ones(len(sc["gap"]))
    short = np.flatnonzero(sc["SC"] >= rc.tau)
    short = short[np.argsort(-sc["SC"][short])][: rc.top_k]
    w[short] = rc.shortcut_weight
    gap = np.argsort(-sc["gap"])[: rc.top_k]
    w[gap] = rc.gap_weight
    return w


def finetune(cfg: TrainConfig, rc: ReweightConfig, state, items, w, seed: int, profile) -> Fusion:
    """Weighted SFT of the last layers only (second hidden layer + head; the paper uses LoRA on the
    last 20% of layers), the rest frozen."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = load(cfg, state, omni=False)
    model.train()
    for p in model.parameters():
        p.requires_grad_(False)
    train_p = list(model.body[2].parameters()) + list(model.head.parameters())
    for p in train_p:
        p.requires_grad_(True)
    opt = torch.optim.Adam(train_p, lr=rc.lr)
    wt = torch.as_tensor(w, dtype=torch.float32)
    for _ in range(rc.steps):
        i = rng.choice(len(w), size=rc.batch_size)
        loss = nn.functional.cross_entropy(model(subset(items, i), gen=gen), torch.as_tensor(items["y"][i]),
                                           reduction="none")
        loss = (loss * wt[i]).sum() / wt[i].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)
