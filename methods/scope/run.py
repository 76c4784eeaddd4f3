"""SCOPE's torch steps: the outcome table of the pool, the predictor's SFT and GRPO stages,
prediction, and the routing analysis (metrics, Pareto curve, budget mode, figure)."""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from methods.core.model_pool import pool
from methods.core.results import InputError, atomic_path, dumps as strict_dumps, read_json, write_json

from . import core
from .config import OutcomeConfig, PredictorConfig, QueryConfig


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

    if not cfg.queries.generated:
        return build_outcomes_dataset(cfg, member_dirs, out)
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


# ---- direct-answer members -----------------------------------------------------------------
def direct_target(item: dict) -> str:
    """The completion of a direct-answer member: the answer alone, no scratchpad (`A:159` for
    `Q:47*3+18=`); `tasks.is_correct` reads it as it reads a scratchpad's final `A:` segment."""
    from methods.core.model_pool import tasks

    return f"A:{item['answer']}{tasks.END}"


def direct_pairs(train: list[dict], mix_arith: float, seed: int) -> list[tuple[str, str]]:
    """The shared pool's training mixture (`model_pool.pool._mixture`) with direct-answer targets."""
    return pool._mixture(train, mix_arith, seed, target=direct_target)


def train_direct_member(pool_section: dict, name: str, data_dir: str | Path, out: str | Path) -> dict:
    """A pool member that answers directly (a terse "non-reasoning" model: few output tokens, no
    scratchpad), trained by the shared pool's trainer on the shared data; a pool member directory
    (`pool_member.json`) that `pool.load` reads like any other."""
    from methods.core.results import read_jsonl

    cfg = pool.pool_config(pool_section)
    m = pool.member(cfg, name)
    if m.hub is not None:
        raise InputError(f"direct member {name}: a hub member is not trained here")
    pairs = direct_pairs(read_jsonl(Path(data_dir) / "train.jsonl"), m.mix_arith, m.seed)
    return pool._train_lm(pairs, m.model, m.train, m.seed, data_dir, out,
                          {"name": name, "mix_arith": m.mix_arith, "role": "policy", "target": "direct"})


# ---- paper scale: the released outcome dataset ------------------------------------------
# SCOPE-60K (arXiv 2601.22323 §4; read as the official scripts read it): one record per
# (question, model) with `id`, `prompt`, `model_name`, `is_correct`, `usage_prompt_tokens`,
# `usage_completion_tokens` (and `category`, `gt`); split `anchor` (the anchor bank) and `test`.
RECORD_FIELDS = ("id", "prompt", "model_name", "is_correct", "usage_prompt_tokens", "usage_completion_tokens")
DATASET_SPLITS = ("anchor", "test")
EMBED_CHARS = 2000   # the official retrieval truncates texts to 2,000 characters


def _member_hubs(names: list[str], member_dirs: dict[str, str]) -> dict[str, str]:
    """Each pool member's hub id (its OpenRouter id at paper scale), from its pointer directory."""
    hubs = {}
    for n in names:
        f = Path(member_dirs[n]) / "pool_member.json"
        if not f.is_file():
            raise InputError(f"pool member {n}: not a pool member directory (no pool_member.json): {member_dirs[n]}")
        hub = read_json(f).get("hub")
        if not hub:
            raise InputError(f"pool member {n}: a trained member has no record in an outcome dataset (set its hub id)")
        hubs[n] = hub
    return hubs


def embed_hub(model_id: str, anchor_texts: list[str], query_texts: list[str], batch: int = 8):
    """Qwen3-Embedding-style sentence vectors (the official retrieval's encoder): the last token's
    final hidden state (left padding, the tokenizer's own end token), L2-normalised; texts cut to
    2,000 characters as the official code does."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from methods.core.runtime import current

    rt = current()
    try:
        tok = AutoTokenizer.from_pretrained(model_id, padding_side="left")
        model = AutoModel.from_pretrained(model_id, dtype=rt.weight_dtype(False), use_safetensors=True)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load embedder {model_id}: {str(e).splitlines()[0]}") from None
    model = model.to(rt.device).eval()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token

    def enc(texts):
        out = []
        for i in range(0, len(texts), batch):
            b = tok([t[:EMBED_CHARS] for t in texts[i:i + batch]], padding=True, return_tensors="pt").to(rt.device)
            with torch.no_grad():
                h = model(**b).last_hidden_state[:, -1].float()
            out.append(torch.nn.functional.normalize(h, dim=-1).cpu().numpy())
        return np.concatenate(out)

    return enc(anchor_texts), enc(query_texts)


def build_outcomes_dataset(cfg: OutcomeConfig, member_dirs: dict[str, str], out: str | Path) -> dict:
    """outcomes.json from the released outcome dataset (paper scale): the pool models are API
    models (hub = OpenRouter id) that are not run; their outcome on every anchor and test
    question is the dataset's record (`model_name` matched to the hub id by the official name
    normalisation), priced with `pool.prices`. Questions missing a record of some pool model are
    dropped (counted). Retrieval: cosine top-k_retrieve anchors by `pool.embedder`."""
    from methods.core.data import load_records

    names, src = cfg.pool.members, cfg.queries.source
    missing = [m for m in names if m not in member_dirs]
    if missing:
        raise InputError(f"config key 'pool.members': {missing} not among the member dirs {sorted(member_dirs)}")
    hubs = _member_hubs(names, member_dirs)
    key = {n: core.normalize_model_name(h) for n, h in hubs.items()}
    items, rows, dropped = [], {n: [] for n in names}, {}
    for split in DATASET_SPLITS:
        recs = load_records(src, split)
        if not recs:
            raise InputError(f"outcome dataset {src!r} split {split!r} is empty")
        absent = [f for f in RECORD_FIELDS if f not in recs[0]]
        if absent:
            raise InputError(f"outcome dataset {src!r} split {split!r} has no field(s) {absent} (has {sorted(recs[0])})")
        by_q: dict = {}
        for r in recs:
            q = by_q.setdefault(r["id"], {"prompt": r["prompt"], "category": r.get("category", ""),
                                          "gt": r.get("gt", ""), "by_model": {}})
            q["by_model"].setdefault(core.normalize_model_name(str(r["model_name"])), r)
        have = {m for q in by_q.values() for m in q["by_model"]}
        lost = [n for n in names if key[n] not in have]
        if lost:
            raise InputError(f"outcome dataset {src!r} split {split!r} has no records of pool member(s) "
                             f"{[(n, hubs[n]) for n in lost]} (its models: {sorted(have)})")
        dropped[split] = 0
        for qid_src, q in by_q.items():
            if any(key[n] not in q["by_model"] for n in names):
                dropped[split] += 1
                continue
            items.append({"qid": len(items), "id": qid_src, "prompt": q["prompt"], "category": q["category"],
                          "gt": q["gt"], "split": split})
            for n in names:
                r = q["by_model"][key[n]]
                pt, ct = int(r["usage_prompt_tokens"] or 0), int(r["usage_completion_tokens"] or 0)
                pin, pout = cfg.pool.prices[n]
                rows[n].append({"correct": bool(r["is_correct"]), "tokens": ct, "prompt_tokens": pt,
                                "cost": (pt * pin + ct * pout) / 1e6})
    models = {n: {"hub": hubs[n], "price_in": cfg.pool.prices[n][0], "price_out": cfg.pool.prices[n][1],
                  "rows": rows[n]} for n in names}
    for n in names:
        print(f"{n} ({hubs[n]}): acc {np.mean([r['correct'] for r in rows[n]]):.3f} over {len(rows[n])} questions",
              flush=True)
    anchors = [it for it in items if it["split"] == "anchor"]
    if len(anchors) <= cfg.pool.k_retrieve:
        raise InputError(f"outcome dataset {src!r}: {len(anchors)} complete anchor questions, need more than "
                         f"pool.k_retrieve = {cfg.pool.k_retrieve}")
    texts = [it["prompt"] for it in items]
    if cfg.pool.embedder:
        A, Q = embed_hub(cfg.pool.embedder, [a["prompt"] for a in anchors], texts)
    else:
        A, Q = core.embed([a["prompt"] for a in anchors], texts)
    idx, sims = core.topk_cosine(Q, A, cfg.pool.k_retrieve + 1)
    retrieval = []
    for i, it in enumerate(items):   # an anchor never retrieves itself
        keep = [(int(anchors[j]["qid"]), float(s)) for j, s in zip(idx[i], sims[i]) if anchors[j]["qid"] != it["qid"]]
        retrieval.append(keep[:cfg.pool.k_retrieve])
    res = {"queries": items, "models": models, "order": names, "unseen": cfg.pool.unseen, "retrieval": retrieval,
           "source": src, "dropped_incomplete": dropped}
    write_json(out, res)
    return {m: float(np.mean([r["correct"] for r in v["rows"]])) for m, v in models.items()}



# ---- predictor data ---------------------------------------------------------------------
def examples(oc: dict, split: str, k: int, models: list[str], cot: bool = False) -> list[dict]:
    """One prompt per (query of `split`, model): the model's outcomes on the query's top-k anchors;
    `cot`: the released predictor's prompt (`core.build_cot_prompt`, the model named by its hub id),
    else the compact prompt of the predictor trained here."""
    qs = oc["queries"]
    out = []
    for it in qs:
        if it["split"] != split:
            continue
        anc = [a for a, _ in oc["retrieval"][it["qid"]][:k]]
        for m in models:
            rows = oc["models"][m]["rows"]
            shots = [(qs[a]["prompt"], rows[a]["tokens"], rows[a]["correct"]) for a in anc]
            prompt = (core.build_cot_prompt(oc["models"][m]["hub"], it["prompt"], shots) if cot
                      else core.build_prompt(m, it["prompt"], shots))
            r = rows[it["qid"]]
            out.append({"qid": it["qid"], "model": m, "prompt": prompt,
                        "target": core.performance(r["tokens"], r["correct"]) + "\n",
                        "len": r["tokens"], "correct": r["correct"]})
    return out


PREDICTOR_INFO = "scope_predictor.json"
SCORE_BATCH = 4   # sequences per scoring forward of the hub predictor (workflow/rules/helpers/scope.smk sizes it so)


def _need_train_split(oc: dict) -> None:
    if not any(it["split"] == "train" for it in oc["queries"]):
        raise InputError(f"outcomes from {oc.get('source')!r} have no train split: training the predictor on the "
                         "outcome dataset is not implemented here (set predictor.hub to the released predictor)")


def write_hub_predictor(cfg: PredictorConfig, variant: str, k: int, out: str | Path) -> dict:
    """Paper scale: the released predictor (`predictor.hub`, already SFT + GRPO) is used as it is,
    so the SFT and GRPO steps write a pointer to it (its hub id, the anchors in its prompt and its
    decoding); the no-anchor variant is the same model prompted with k = 0 anchors."""
    info = {"variant": variant, "k": k, "hub": cfg.hub, "decode": asdict(cfg.decode)}
    with atomic_path(out, is_dir=True) as tmp:
        (Path(tmp) / PREDICTOR_INFO).write_text(strict_dumps(info, indent=1))
    return info


def predictor_info(model_dir: str | Path) -> dict:
    f = Path(model_dir) / PREDICTOR_INFO
    if not f.is_file():
        raise InputError(f"not a SCOPE predictor directory (no {PREDICTOR_INFO}): {model_dir}")
    return read_json(f)


def predict_hub(info: dict, exs: list[dict]) -> list[dict]:
    """The released predictor on the prompts of `exs` (`examples(..., cot=True)`), as the official
    inference runs it: the prompt as the user turn of the model's chat template, sampled
    (`decode`), parsed by `core.parse_cot`. P(correct): at the correctness slot the parsed
    completion fills (`core.correctness_slot`), softmax of the log-probs of the continuations
    `yes` and `no` given the prompt and the completion up to the slot; the parsed yes/no (1/0)
    where the slot is not in the raw text, 0.5 where the completion has no correctness. Length:
    the parsed one, else the median parsed length."""
    from methods.core.llm import HFBackend

    d = info["decode"]
    llm = HFBackend(info["hub"], batch_size=d["batch_size"])
    convs = [[{"role": "user", "content": e["prompt"]}] for e in exs]
    texts = [o[0] for o in llm.chat(convs, max_new_tokens=d["max_new_tokens"], temperature=d["temperature"],
                                    top_p=d["top_p"], seed=d["seed"])]
    parsed = [core.parse_cot(t) for t in texts]
    slots = [core.correctness_slot(t) for t in texts]
    idx = [i for i, s in enumerate(slots) if s is not None]
    heads = [llm.render_chat(convs[i]) + slots[i][0] for i in idx]
    # scoring materialises fp32 log-probs over the whole vocabulary at every position of prompt +
    # reasoning (≈ 3k tokens × 152k for Qwen3: ≈ 2 GB a sequence): a few sequences at a time
    llm.batch_size = min(d["batch_size"], SCORE_BATCH)
    lp_yes = llm.score(heads, [slots[i][1] + "yes" for i in idx])
    lp_no = llm.score(heads, [slots[i][1] + "no" for i in idx])
    p_yes = {i: float(1.0 / (1.0 + np.exp(sum(n) - sum(y)))) for i, y, n in zip(idx, lp_yes, lp_no)}
    lens = [L for L, _ in parsed if L is not None]
    med = int(np.median(lens)) if lens else 0
    out = []
    for i, (L, c) in enumerate(parsed):
        p = p_yes.get(i, 0.5 if c is None else float(c))
        out.append({"pred_len": L if L is not None else med, "pred_correct": p,
                    "parsed": L is not None and c is not None})
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

    if variant not in ("anchors", "noanchor"):
        raise InputError(f"unknown predictor variant {variant!r} (anchors or noanchor)")
    k = cfg.k_prompt if variant == "anchors" else 0
    if cfg.hub is not None:
        return write_hub_predictor(cfg, variant, k, out)
    oc = read_json(outcomes)
    _need_train_split(oc)
    seen = [m for m in oc["order"] if m != oc["unseen"]]
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
    save_model(model, tok, out, {"scope_predictor.json": strict_dumps(info, indent=1)})
    return info


def train_grpo(cfg: PredictorConfig, outcomes: str, sft_dir: str, out: str | Path) -> dict:
    """RL stage (GRPO, `methods.core.rl`): G samples per prompt from the policy, reward of
    `core.reward`, group advantages (sample std, `rl.group_advantages`), one on-policy update per
    batch (ratio 1, so clipping is inactive) of the per-sequence token-mean loss (`norm="seq"`,
    arXiv 2402.03300 Eq. 3) with the k3 KL β to the frozen SFT model."""
    import torch

    from methods.core import rl
    from methods.core.models import load_model, save_model

    if cfg.hub is not None:
        return write_hub_predictor(cfg, "rl", cfg.k_prompt, out)
    g = cfg.grpo
    oc = read_json(outcomes)
    _need_train_split(oc)
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
    save_model(policy, tok, out, {"scope_predictor.json": strict_dumps(info, indent=1)})
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
