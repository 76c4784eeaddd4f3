"""FusionRoute's domain experts: training one (or pointing at its hub id at paper scale), loading
them, and their stacked next-token logits."""
from __future__ import annotations

import json
import time
from pathlib import Path

from methods.core.results import InputError, atomic_path, read_json, read_jsonl

from . import data as D
from .config import ExpertConfig, Hub


def train_expert(cfg: ExpertConfig, home: str, seed: int, data_dir, out, hub: Hub) -> dict:
    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model, save_model
    from methods.core.train import train

    if home not in D.EXPERT_DOMAINS:
        raise InputError(f"unknown expert domain {home!r} (one of {D.EXPERT_DOMAINS})")
    if any(hub.experts.values()):
        info = {"domain": home, "hub": hub.experts[home]}
        with atomic_path(out, is_dir=True) as tmp:
            (tmp / "expert.json").write_text(json.dumps(info, indent=1))
        return info
    tok = D.load_tok(data_dir)
    train_items = read_jsonl(Path(data_dir) / "train.jsonl")
    items = D.mixture(train_items, D.expert_weights(home, D.saved_home_frac(data_dir)), cfg.n_train, seed)
    batches = PromptAnswerBatches(D.prompt_answer_pairs(items), tok)
    model = build_model(cfg.model, tok, cfg.init_seed)
    t0 = time.perf_counter()
    rows = train(model, lambda s: batches.batch(s, cfg.train.batch_size, seed), cfg.train,
                 desc=f"expert_{home}")
    info = {"domain": home, "hub": None, "seed": seed, "train_s": time.perf_counter() - t0,
            "final_loss": rows[-1]["loss"], "n_params": sum(p.numel() for p in model.parameters()),
            "log": rows}
    save_model(model, tok, out, {"expert.json": json.dumps(info, indent=1)})
    return info


def load_experts(dirs: list[str]):
    from methods.core.models import load_model

    models = []
    for d in dirs:
        info = read_json(Path(d) / "expert.json")
        models.append(load_model(info.get("hub") or d)[0].eval())
    return models


def expert_logits(experts, ids, mask):
    import torch

    with torch.no_grad():
        return torch.stack([e(input_ids=ids, attention_mask=mask, use_cache=False).logits for e in experts])
