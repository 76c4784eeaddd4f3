"""Mechanistic probes of a pretrained base (the abstract's mechanisms:
linear separability, attention regularisation, overfitting; protocols ours).

(a) linear separability: a logistic-regression probe (scikit-learn) predicting a person's
    attribute (city) from a last-layer hidden state; k-fold CV accuracy. Features
    (`probe_features`): "name" = the mean hidden state of the name alone (the fact must be
    stored in the weights); "recall" = the hidden state at the last position of a context that
    states the fact, then another fact, then asks for it in another paraphrase
    ("kovar lives in lima. kovar's favourite colour is teal. the city of kovar is ") — the
    position where the model must recall the fact from its context, a skill the biographies
    train (they repeat facts in paraphrase).
(b) attention: per-head ‖W_Q^h W_K^hᵀ‖_F (the bilinear form of the pre-RoPE attention logits)
    and the mean effective rank of attention maps on validation sequences.
(c) overfitting: the gap val − train of the pretraining loss on fixed windows.
"""
from __future__ import annotations

from pathlib import Path

from methods.core.models import load_model
from methods.core.results import read_jsonl
from methods.core.train import evaluate_loss
from methods.wd_plasticity.config import ProbeConfig

from .pretrain import weight_rms


def effective_rank(mats):
    """Roy & Vetterli (2007) effective rank exp(H(p)), p = σ / Σσ, for a batch of matrices."""
    import torch

    s = torch.linalg.svdvals(mats.double())
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-300)
    h = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    return torch.exp(h)


def qk_norms(model) -> list[list[float]]:
    """‖W_Q^h W_K^hᵀ‖_F per layer and head: q·k = xᵀ W_Q^hᵀ W_K^h x before RoPE, so this
    is the Frobenius norm of the d×d bilinear form each head scores token pairs with."""
    cfg = model.config
    n_h, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    dh = cfg.hidden_size // n_h
    out = []
    for layer in model.model.layers:
        wq = layer.self_attn.q_proj.weight.detach().double().view(n_h, dh, -1)
        wk = layer.self_attn.k_proj.weight.detach().double().view(n_kv, dh, -1)
        wk = wk.repeat_interleave(n_h // n_kv, dim=0)  # grouped-query heads share a K
        bilinear = wq.transpose(1, 2) @ wk              # (heads, d, d)
        out.append(bilinear.flatten(1).norm(dim=1).tolist())
    return out


def attention_effective_rank(model, batches: list[dict]) -> float:
    """Mean effective rank over layers, heads and sequences of the causal attention maps."""
    import torch

    model.config._attn_implementation = "eager"  # sdpa does not return the maps
    ranks = []
    with torch.no_grad():
        for b in batches:
            att = model(input_ids=b["input_ids"], output_attentions=True).attentions
            for a in att:  # (batch, heads, T, T)
                ranks.append(effective_rank(a.flatten(0, 1)))
    model.config._attn_implementation = "sdpa"
    return float(torch.cat(ranks).mean())


def name_features(model, tok, names: list[str]):
    """Last-layer hidden state averaged over each name's tokens."""
    import torch

    feats = []
    with torch.no_grad():
        for n in names:
            ids = torch.tensor([tok(n, add_special_tokens=False)["input_ids"]])
            h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1]
            feats.append(h[0].mean(0).double().numpy())
    import numpy as np

    return np.stack(feats)


def recall_context(person: dict, attribute: str) -> str:
    """The fact in the first paraphrase, the next attribute's fact, then the last paraphrase of
    the fact cut before its value (methods.wd_plasticity.world.TEMPLATES, in-distribution text)."""
    from .world import TEMPLATES

    attrs = list(TEMPLATES)
    other = attrs[(attrs.index(attribute) + 1) % len(attrs)]
    n = person["name"]
    query = TEMPLATES[attribute][-1]
    return (TEMPLATES[attribute][0].format(n=n, v=person[attribute]) + " "
            + TEMPLATES[other][0].format(n=n, v=person[other]) + " "
            + query[:query.index("{v}")].format(n=n))


def recall_features(model, tok, texts: list[str]):
    """Last-layer hidden state at the last position of each text."""
    import numpy as np
    import torch

    feats = []
    with torch.no_grad():
        for t in texts:
            ids = torch.tensor([tok(t, add_special_tokens=False)["input_ids"]])
            feats.append(model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, -1].double().numpy())
    return np.stack(feats)


def probe_accuracy(features, labels, folds: int, c: float = 1.0, seed: int = 0) -> float:
    """Stratified k-fold CV accuracy of a standardised multinomial logistic regression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(cross_val_score(clf, features, labels, cv=cv).mean())


def run_probes(cfg: ProbeConfig, base_dir: str | Path, data_dir: str | Path, shards_dir: str | Path,
               seq_len: int) -> dict:
    """`data_dir` holds people.jsonl; `shards_dir` the tokenized corpus (train/, val/)."""
    from collections import Counter

    from methods.core.shards import ShardedTokenStream

    data_dir = Path(data_dir)
    model, tok = load_model(base_dir)
    out: dict = {"weight_rms": weight_rms(model)}
    people = read_jsonl(data_dir / "people.jsonl") if (data_dir / "people.jsonl").exists() else []
    if people:
        labels = [p[cfg.probe_attribute] for p in people]
        # classes with fewer members than folds cannot be stratified; probe the rest
        keep = [i for i, l in enumerate(labels) if Counter(labels)[l] >= cfg.cv_folds]
        if cfg.probe_features == "name":
            feats = name_features(model, tok, [people[i]["name"] for i in keep])
        else:
            feats = recall_features(model, tok, [recall_context(people[i], cfg.probe_attribute) for i in keep])
        y = [labels[i] for i in keep]
        out["probe_accuracy"] = probe_accuracy(feats, y, cfg.cv_folds, cfg.probe_c)
        out["probe_chance"] = max(Counter(y).values()) / len(y)
        out["probe_n"] = len(y)
    qk = qk_norms(model)
    out["qk_norm_per_head"] = qk
    out["qk_norm"] = sum(map(sum, qk)) / sum(map(len, qk))
    val = ShardedTokenStream(Path(shards_dir) / "val", seq_len)
    train = ShardedTokenStream(Path(shards_dir) / "train", seq_len)
    att_batches = val.sequential_batches(cfg.batch_size, -(-cfg.n_val_sequences // cfg.batch_size))
    out["attention_effective_rank"] = attention_effective_rank(model, att_batches)
    out["train_loss"] = evaluate_loss(model, train.sequential_batches(cfg.batch_size, cfg.loss_batches))
    out["val_loss"] = evaluate_loss(model, val.sequential_batches(cfg.batch_size, cfg.loss_batches))
    out["train_val_gap"] = out["val_loss"] - out["train_loss"]
    return out
