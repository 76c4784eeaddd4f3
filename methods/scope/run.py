"""SCOPE's torch steps: the outcome table of the pool, the predictor's SFT and GRPO stages,
prediction, and the routing analysis (metrics, Pareto curve, budget mode, figure)."""
from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from methods.core.model_pool import pool
from methods.core.results import InputError, read_json, write_json

from . import core
from .config import OutcomeConfig, PredictorConfig, QueryConfig


def _need_generated(source: str):
    if source != "generated":
        raise InputError(f"config key 'queries.source': {source!r} — paper-scale SCOPE-60K evaluation is planned "
                         "in the DAG but not implemented in this harness (tiny/smoke use 'generated')")


# ---- outcome table ------------------------------------------------------------------------
def make_queries(q: QueryConfig) -> list[dict]:
    from methods.core.model_pool import tasks

    tasks.check_ops(q.ops, "outcomes.queries.ops")
    rng = random.Random(q.seed)
    n = q.n_anchor + q.n_train + q.n_test
    items, seen = [], set()
    while len(items) < n:
        it = (tasks.arith_item(rng, q.max_ops, q.max_digits, q.ops) if len(items) % 2 == 0
              else tasks.rev_item(rng, q.rev_min, q.rev_max))
        if it["prompt"] not in seen:
            seen.add(it["prompt"])
            items.append(it)
    rng.shuffle(items)
    for i, it in enumerate(items):
        it["qid"] = i
        it["split"] = "anchor" if i < q.n_anchor else "train" if i < q.n_anchor + q.n_train else "test"
    return items


def build_outcomes(cfg: OutcomeConfig, member_dirs: dict[str, str], out: str | Path) -> dict:
    """outcomes.json: queries, per model its price and per query (correct, #out tokens, cost),
    and the anchor retrieval (top-k_retrieve cosine) of every non-anchor query."""
    import torch

    from methods.core.model_pool import tasks

    _need_generated(cfg.queries.source)
    names = cfg.pool.members   # unseen is among them (config.PoolUse)
    missing = [m for m in names if m not in member_dirs]
    if missing:
        raise InputError(f"config key 'pool.members': {missing} not among the member dirs {sorted(member_dirs)}")
    torch.set_grad_enabled(False)
    items = make_queries(cfg.queries)
    prompts = [it["prompt"] for it in items]
    models = {}
    for name in names:
        t0 = time.perf_counter()
        model, tok, info = pool.load(member_dirs[name])
        model.eval()
        n_params = sum(p.numel() for p in model.parameters())
        price_out = cfg.pool.price_per_10k * n_params / 1e4
        price_in = price_out / 2
        comps = pool.complete(model, tok, prompts, cfg.pool.max_new_tokens)
        rows = []
        for it, c in zip(items, comps):
            n_in = len(tok(it["prompt"], add_special_tokens=False)["input_ids"])
            text = tok.decode(c)
            rows.append({"correct": bool(tasks.is_correct(it, text)), "tokens": len(c),
                         "cost": (n_in * price_in + len(c) * price_out) / 1e6, "prompt_tokens": n_in})
        models[name] = {"n_params": n_params, "price_in": price_in, "price_out": price_out, "rows": rows,
                        "gen_s": time.perf_counter() - t0}
        print(f"{name}: params {n_params} acc {np.mean([r['correct'] for r in rows]):.3f}", flush=True)
    anchors = [it for it in items if it["split"] == "anchor"]
    A, Q = core.embed([a["prompt"] for a in anchors], prompts)
    idx, sims = core.topk_cosine(Q, A, cfg.pool.k_retrieve + 1)
    retrieval = []
    for i, it in enumerate(items):   # an anchor never retrieves itself
        keep = [(int(anchors[j]["qid"]), float(s)) for j, s in zip(idx[i], sims[i]) if anchors[j]["qid"] != it["qid"]]
        retrieval.append(keep[:cfg.pool.k_retrieve])
    res = {"queries": items, "models": models, "order": names, "unseen": cfg.pool.unseen, "retrieval": retrieval}
    write_json(out, res)
    return {m: float(np.mean([r["correct"] for r in v["rows"]])) for m, v in models.items()}


# ---- predictor data ---------------------------------------------------------------------
def examples(oc: dict, split: str, k: int, models: list[str]) -> list[dict]:
    """One prompt per (query of `split`, model): the model's outcomes on the query's top-k anchors."""
    qs = oc["queries"]
    out = []
    for it in qs:
        if it["split"] != split:
            continue
        anc = [a for a, _ in oc["retrieval"][it["qid"]][:k]]
        for m in models:
            rows = oc["models"][m]["rows"]
            prompt = core.build_prompt(m, it["prompt"],
                                       [(qs[a]["prompt"], rows[a]["tokens"], rows[a]["correct"]) for a in anc])
            r = rows[it["qid"]]
            out.append({"qid": it["qid"], "model": m, "prompt": prompt,
                        "target": core.performance(r["tokens"], r["correct"]) + "\n",
                        "len": r["tokens"], "correct": r["correct"]})
    return out


def _tokenizer():
    from methods.core.tokenizer import train_tokenizer

    return train_tokenizer([core.ALPHABET], "char")


def train_sft(cfg: PredictorConfig, outcomes: str, variant: str, out: str | Path) -> dict:
    """SFT of the char-level predictor on `performance(...)` targets (no CoT at tiny scale);
    variant 'anchors' (k_prompt anchors) or 'noanchor' (k = 0)."""
    import torch

    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model, save_model
    from methods.core.train import evaluate_loss, train

    if cfg.hub is not None:
        raise InputError("config key 'predictor.hub': paper-scale predictor is a hub checkpoint, not trained here")
    if variant not in ("anchors", "noanchor"):
        raise InputError(f"unknown predictor variant {variant!r} (anchors or noanchor)")
    oc = read_json(outcomes)
    seen = [m for m in oc["order"] if m != oc["unseen"]]
    k = cfg.k_prompt if variant == "anchors" else 0
    ex = examples(oc, "train", k, seen)
    tok = _tokenizer()
    pairs = [(e["prompt"], e["target"]) for e in ex]
    longest = max(len(p) + len(t) for p, t in pairs)
    if longest > cfg.model.max_seq_len:
        raise InputError(f"config key 'predictor.model.max_seq_len': {cfg.model.max_seq_len} < longest example {longest}")
    batches = PromptAnswerBatches(pairs, tok)
    val = PromptAnswerBatches(pairs[::max(1, len(pairs) // 256)][:256], tok).sequential_batches(64)
    model = build_model(cfg.model, tok, cfg.seed)
    tcfg = replace(cfg.sft, seed=cfg.seed)
    rows = train(model, lambda s: batches.batch(s, tcfg.batch_size, cfg.seed), tcfg,
                 eval_fn=lambda: {"val_loss": evaluate_loss(model, val)}, desc=f"sft_{variant}")
    info = {"variant": variant, "k": k, "n_examples": len(pairs), "log": rows,
            "n_params": sum(p.numel() for p in model.parameters())}
    torch.set_grad_enabled(False)
    save_model(model, tok, out, {"scope_predictor.json": json.dumps(info, indent=1)})
    return info


def train_grpo(cfg: PredictorConfig, outcomes: str, sft_dir: str, out: str | Path) -> dict:
    """RL stage (GRPO, `methods.core.rl`): G samples per prompt from the policy, reward of
    `core.reward`, group advantages (sample std, `rl.group_advantages`), one on-policy update per
    batch (ratio 1, so clipping is inactive) of the per-sequence token-mean loss (`norm="seq"`,
    arXiv 2402.03300 Eq. 3) with the k3 KL β to the frozen SFT model."""
    import torch

    from methods.core import rl
    from methods.core.models import load_model, save_model

    g = cfg.grpo
    oc = read_json(outcomes)
    seen = [m for m in oc["order"] if m != oc["unseen"]]
    ex = examples(oc, "train", cfg.k_prompt, seen)
    policy, tok = load_model(sft_dir, training=True)
    ref, _ = load_model(sft_dir)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=g.lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = random.Random(g.seed)
    torch.manual_seed(g.seed)
    log = []
    for step in range(g.steps):
        batch = [ex[rng.randrange(len(ex))] for _ in range(g.prompts)]
        ids = [tok(e["prompt"], add_special_tokens=False)["input_ids"] for e in batch]
        policy.eval()
        comps = pool.complete(policy, tok, [e["prompt"] for e in batch], 24, temperature=g.temperature,
                              num_return_sequences=g.group)
        rewards, seqs, starts = [], [], []
        for i, c in enumerate(comps):
            e = batch[i // g.group]
            rewards.append(core.reward(tok.decode(c), e["len"], e["correct"])["total"])
            seqs.append(ids[i // g.group] + c)
            starts.append(len(ids[i // g.group]))
        adv = rl.group_advantages(torch.tensor(rewards, dtype=torch.float64), g.group).float()
        policy.train()
        lp, mask = rl.sequence_logprobs(policy, seqs, starts, tok.pad_token_id)
        with torch.no_grad():
            ref_lp, _ = rl.sequence_logprobs(ref, seqs, starts, tok.pad_token_id)
        loss = rl.grpo_loss(lp, lp.detach(), adv, mask, norm="seq", beta=g.beta, ref_logp=ref_lp)
        kl = rl.masked_mean(rl.k3_kl(lp.detach(), ref_lp), mask, "seq")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        log.append({"step": step, "reward": float(np.mean(rewards)), "kl": float(kl), "loss": float(loss)})
        if step % 10 == 0 or step == g.steps - 1:
            print(json.dumps(log[-1]), flush=True)
    info = {"variant": "rl", "k": cfg.k_prompt, "log": log}
    torch.set_grad_enabled(False)
    save_model(policy, tok, out, {"scope_predictor.json": json.dumps(info, indent=1)})
    return info


def predict(model_dir: str, exs: list[dict], batch: int = 256) -> list[dict]:
    """Greedy prediction of `{len: L, correct: ...}`; P(correct) = softmax over 'y'/'n' at the
    correctness slot given the predicted length, read from the generation's own logits when the
    completion starts `{len: L, correct: ` (else one extra forward pass over that canonical prefix;
    parse failure → the median predicted length is used)."""
    import torch

    from methods.core.models import load_model

    model, tok = load_model(model_dir)
    model.eval()
    torch.set_grad_enabled(False)
    comps, logits = pool.complete(model, tok, [e["prompt"] for e in exs], 24, chunk=batch, return_logits=True)
    parsed = [core.parse(tok.decode(c)) for c in comps]
    lens = [p[0] for p in parsed if p is not None]
    med = int(np.median(lens)) if lens else 20
    y_id, n_id = tok.convert_tokens_to_ids("y"), tok.convert_tokens_to_ids("n")
    pred_len = [p[0] if p is not None else med for p in parsed]
    heads = [tok(f"{{len: {L}, correct: ", add_special_tokens=False)["input_ids"] for L in pred_len]
    two = [lg[len(h), [y_id, n_id]] if c[:len(h)] == h and len(c) > len(h) else None
           for c, lg, h in zip(comps, logits, heads)]
    redo = [k for k, t in enumerate(two) if t is None]
    for i in range(0, len(redo), batch):
        rows = redo[i:i + batch]
        seqs = [tok(exs[k]["prompt"], add_special_tokens=False)["input_ids"] + heads[k] for k in rows]
        w = max(map(len, seqs))
        x = torch.full((len(seqs), w), tok.pad_token_id, dtype=torch.long)
        for j, s in enumerate(seqs):
            x[j, :len(s)] = torch.tensor(s)
        lg = model(input_ids=x).logits
        for j, (k, s) in enumerate(zip(rows, seqs)):
            two[k] = lg[j, len(s) - 1, [y_id, n_id]].float()
    return [{"pred_len": L, "pred_correct": float(torch.softmax(t, 0)[0]), "parsed": p is not None}
            for L, t, p in zip(pred_len, two, parsed)]
