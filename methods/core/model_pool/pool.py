"""Pool spec, member training, cost measurement and the loader.

A member is a core Llama (`methods.core.models.build_model`) trained with the core trainer on a
mixture of the task families (`mix_arith` = share of arithmetic; the rest is `rev`), so members
differ in size and in specialty. At paper scale a member names a hub id and is not trained.
Costs: analytic matmul FLOPs per token from the config, checked against
`torch.utils.flop_counter.FlopCounterMode`, and measured wall time per token.
"""
from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

from methods.core.config import from_dict
from methods.core.results import InputError, dumps as strict_dumps, read_json, write_jsonl

from . import tasks
from .config import Config as PoolConfig, MemberConfig


def pool_config(d: dict) -> PoolConfig:
    """The `model_pool:` section, every key and the checks that relate keys checked (config.py)."""
    cfg = from_dict(PoolConfig, d, "model_pool")
    tasks.check_ops(cfg.data.ops, "model_pool.data.ops")
    return cfg


def member(cfg: PoolConfig, name: str) -> MemberConfig:
    for m in cfg.members:
        if m.name == name:
            return m
    raise InputError(f"unknown pool member {name!r} (config key 'model_pool.members': {[m.name for m in cfg.members]})")


# ---- data -------------------------------------------------------------------------------
def build_data(cfg: PoolConfig, out: str | Path) -> dict:
    from methods.core.results import atomic_path
    from methods.core.tokenizer import save_tokenizer, train_tokenizer

    train, test = tasks.generate(cfg.data)
    with atomic_path(out, is_dir=True) as tmp:
        write_jsonl(tmp / "train.jsonl", train)
        write_jsonl(tmp / "test.jsonl", test)
        save_tokenizer(train_tokenizer([tasks.alphabet()], "char"), tmp / "tokenizer")
    return {"train": len(train), "test": len(test)}


def _read_jsonl(path):
    from methods.core.results import read_jsonl

    return read_jsonl(path)


def _mixture(train: list[dict], mix_arith: float, seed: int, target=None) -> list[tuple[str, str]]:
    """The member's training pairs: every item of its main family, the other family subsampled
    so that arithmetic makes up `mix_arith` of the pairs; completions by `target(item)` (default
    `tasks.target`, the scratchpad)."""
    target = target or tasks.target
    by = {f: [t for t in train if t["family"] == f] for f in tasks.FAMILIES}
    n = min(len(by["arith"]), len(by["rev"]))
    if mix_arith >= 0.5:
        k_arith, k_rev = n, round(n * (1 - mix_arith) / mix_arith)
    else:
        k_arith, k_rev = round(n * mix_arith / (1 - mix_arith)), n
    rng = random.Random(seed)
    items = rng.sample(by["arith"], k_arith) + rng.sample(by["rev"], k_rev)
    return [(t["prompt"], target(t)) for t in items]


def _train_lm(pairs, model_cfg, train_cfg, seed, data_dir, out, extra):
    import torch

    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model, save_model
    from methods.core.tokenizer import load_tokenizer
    from methods.core.train import train

    tok = load_tokenizer(Path(data_dir) / "tokenizer")
    batches = PromptAnswerBatches(pairs, tok)
    val = PromptAnswerBatches(pairs[:: max(1, len(pairs) // 256)][:256], tok).sequential_batches(64)
    model = build_model(model_cfg, tok, seed)
    from dataclasses import replace

    tcfg = replace(train_cfg, seed=seed)
    from methods.core.train import evaluate_loss

    rows = train(model, lambda s: batches.batch(s, tcfg.batch_size, seed), tcfg,
                 eval_fn=lambda: {"val_loss": evaluate_loss(model, val)}, desc=extra["name"])
    extra = {**extra, "n_params": sum(p.numel() for p in model.parameters()), "log": rows,
             "n_train_pairs": len(pairs)}
    torch.set_grad_enabled(False)
    save_model(model, tok, out, {"pool_member.json": strict_dumps(extra, indent=1)})
    return extra


def train_member(cfg: PoolConfig, name: str, data_dir: str | Path, out: str | Path) -> dict:
    """DAG step: train one member (or, for a hub member, write its pointer)."""
    m = member(cfg, name)
    if m.hub is not None:
        from methods.core.results import atomic_path

        with atomic_path(out, is_dir=True) as tmp:
            (tmp / "pool_member.json").write_text(json.dumps({"name": name, "hub": m.hub}))
        return {"name": name, "hub": m.hub}
    train = _read_jsonl(Path(data_dir) / "train.jsonl")
    pairs = _mixture(train, m.mix_arith, m.seed)
    return _train_lm(pairs, m.model, m.train, m.seed, data_dir, out,
                     {"name": name, "mix_arith": m.mix_arith, "role": "policy"})


class VerifierBatches:
    """Batches of process-verifier sequences: `cls` holds the Y/N target at every step mark (`;`,
    final `?`), -100 elsewhere; `labels` holds next-token targets on the gold prefix of the
    completion (an auxiliary LM objective: checking a step needs the model to compute it)."""

    def __init__(self, examples, tok, prompt_lens):
        enc = [(tok(t, add_special_tokens=False)["input_ids"], m, g, pl) for (t, m, g), pl in zip(examples, prompt_lens)]
        # marks are char indices: keep the sequences that tokenize 1:1 (a sampled special token
        # such as `<unk>` decodes to several chars)
        self.ex = [e for e, (t, _, _) in zip(enc, examples) if len(e[0]) == len(t)]
        self.pad = tok.pad_token_id
        self.yn = {"Y": tok.convert_tokens_to_ids("Y"), "N": tok.convert_tokens_to_ids("N")}

    def collate(self, rows):
        import torch

        w = max(len(self.ex[r][0]) for r in rows)
        ids = torch.full((len(rows), w), self.pad, dtype=torch.long)
        mask, lm, cls = torch.zeros_like(ids), torch.full_like(ids, -100), torch.full_like(ids, -100)
        for i, r in enumerate(rows):
            toks, marks, n_gold, pl = self.ex[r]
            ids[i, :len(toks)] = torch.tensor(toks)
            mask[i, :len(toks)] = 1
            for t in range(pl - 1, min(n_gold, len(toks)) - 1):
                lm[i, t] = toks[t + 1]
            for pos, lab in marks:
                lm[i, pos] = -100
                cls[i, pos] = self.yn[lab]
        return {"input_ids": ids, "attention_mask": mask, "labels": lm, "cls": cls}

    def batch(self, step, batch_size, seed):
        import torch

        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return self.collate(torch.randint(0, len(self.ex), (batch_size,), generator=g).tolist())


def verifier_loss(model, batch, lm_weight: float = 0.5):
    """Y/N cross-entropy at the step marks (restricted to the two label tokens) + lm_weight x the
    auxiliary next-token loss on the gold prefix."""
    import torch
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
    sel = batch["cls"] != -100
    yn = logits[sel]
    target = batch["cls"][sel]
    pair = torch.stack([yn[:, batch["y_id"]], yn[:, batch["n_id"]]], -1)
    cls = F.cross_entropy(pair, (target != batch["y_id"]).long())
    lm = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
    return cls + lm_weight * lm


def auroc(scores, labels) -> float:
    """P(score of a positive > score of a negative), ties counted 1/2 (Mann-Whitney); None when
    one class is absent."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    order = sorted([(s, 1) for s in pos] + [(s, 0) for s in neg])
    rank_sum, i = 0.0, 0
    while i < len(order):
        j = i
        while j < len(order) and order[j][0] == order[i][0]:
            j += 1
        r = (i + 1 + j) / 2  # mean 1-based rank of the tie group
        rank_sum += r * sum(1 for k in range(i, j) if order[k][1])
        i = j
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def mark_scores(model, vb: VerifierBatches, batch_size: int = 256):
    """(P(Y) at every mark, label is Y) over all of vb's sequences."""
    import torch

    scores, labels = [], []
    with torch.no_grad():
        for b in range(0, len(vb.ex), batch_size):
            bt = vb.collate(list(range(b, min(b + batch_size, len(vb.ex)))))
            lg = model(input_ids=bt["input_ids"], attention_mask=bt["attention_mask"]).logits.float()
            sel = bt["cls"] != -100
            p = torch.softmax(lg[sel][:, [vb.yn["Y"], vb.yn["N"]]], -1)[:, 0]
            scores += p.tolist()
            labels += (bt["cls"][sel] == vb.yn["Y"]).tolist()
    return scores, labels


def complete(model, tok, prompts: list[str], max_new: int, temperature: float | None = None,
             stops: tuple[str, ...] = (tasks.END,), num_return_sequences: int = 1,
             chunk: int = 512, return_logits: bool = False):
    """Token ids of the completions of `prompts` (left-padded batched HF generate with the KV
    cache), each cut after the token with which its decoded text first contains a stop string
    (text, not ids: see core.tokenizer.stop_criteria): greedy when `temperature` is None, else plain
    sampling at that temperature (no top-k/top-p). With num_return_sequences = n, the n samples
    of prompt i are rows i·n … i·n+n−1. Seed torch's RNG before sampling. With return_logits,
    (ids, logits): logits[i] is the float tensor [len(ids[i]), vocab] of the raw next-token
    logits at each generated position."""
    import torch

    from methods.core.tokenizer import ensure_pad, stop_criteria, stop_index

    pad = ensure_pad(tok)               # Llama-3 has no pad token (padding is masked anyway)
    sample = temperature is not None
    out, out_logits = [], []
    for i in range(0, len(prompts), chunk):
        ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts[i:i + chunk]]
        w = max(map(len, ids))
        x = torch.full((len(ids), w), pad, dtype=torch.long)
        m = torch.zeros_like(x)
        for j, t in enumerate(ids):
            x[j, w - len(t):] = torch.tensor(t)
            m[j, w - len(t):] = 1
        with torch.no_grad():
            # the stops alone end a completion, as stop ids did before (a byte-level BPE has no
            # token "\n" and merges it into others); eos_token_id=[] keeps the model's own eos
            # from doing so too
            y = model.generate(input_ids=x, attention_mask=m, do_sample=sample, temperature=temperature,
                               top_k=0 if sample else None, top_p=None, max_new_tokens=max_new,
                               num_return_sequences=num_return_sequences, eos_token_id=[],
                               stopping_criteria=stop_criteria(tok, stops, w),
                               pad_token_id=pad, output_logits=return_logits,
                               return_dict_in_generate=return_logits)
        if return_logits:
            y, lg = y.sequences, torch.stack(y.logits, 1).float()
        for k, row in enumerate(y[:, w:].tolist()):
            n = stop_index(tok, row, stops)
            out.append(row[:n])
            if return_logits:
                out_logits.append(lg[k, :n])
    return (out, out_logits) if return_logits else out


def sampled_examples(items: list[dict], members: dict[str, str], n: int, temperature: float, seed: int):
    """Completions sampled from every policy member on n random items each, with exact process labels."""
    import torch

    rng = random.Random(seed)
    ex = []
    for k, path in enumerate(members.values()):
        model, tok, _ = load(path)
        chosen = [items[rng.randrange(len(items))] for _ in range(n)]
        torch.manual_seed(seed + k)
        comps = complete(model, tok, [t["prompt"] for t in chosen], 48, temperature)
        ex += [tasks.label_marks(t, t["prompt"] + tok.decode(c)) for t, c in zip(chosen, comps)]
    return ex


def train_verifier(cfg: PoolConfig, data_dir: str | Path, out: str | Path,
                   members: dict[str, str] | None = None) -> dict:
    """DAG step: the process verifier, a core Llama whose LM head is read at the step marks as a
    Y/N classifier (P(Y) after `;` or at a final `?`), trained on exact process labels of gold and
    corrupted scratchpads, with an auxiliary LM loss; reports the validation AUROC at the marks."""
    v = cfg.verifier
    if v.hub is not None:
        from methods.core.results import atomic_path

        with atomic_path(out, is_dir=True) as tmp:
            (tmp / "pool_member.json").write_text(json.dumps({"name": "verifier", "hub": v.hub}))
        return {"name": "verifier", "hub": v.hub}
    from dataclasses import replace

    import torch

    from methods.core.models import build_model, save_model
    from methods.core.tokenizer import load_tokenizer
    from methods.core.train import train

    train_items = _read_jsonl(Path(data_dir) / "train.jsonl")
    tok = load_tokenizer(Path(data_dir) / "tokenizer")
    # every 40th training item is held out (train.jsonl is ordered by family: both are covered)
    val_items = train_items[::40][:512]
    fit_items = [t for i, t in enumerate(train_items) if i % 40 or i // 40 >= 512]
    ex = tasks.verifier_examples(fit_items, v.n_train, v.seed)
    vex = tasks.verifier_examples(val_items, 512, v.seed + 1)
    plen = lambda exs: [t.index("=") + 1 for t, _, _ in exs]  # noqa: E731
    samp, vsamp = [], []
    if v.n_sampled and members:
        samp = sampled_examples(fit_items, members, v.n_sampled, v.temperature, v.seed)
        vsamp = sampled_examples(val_items, members, max(1, v.n_sampled // 4), v.temperature, v.seed + 7)
        ex = ex + samp
    vb, vvb = VerifierBatches(ex, tok, plen(ex)), VerifierBatches(vex, tok, plen(vex))
    vsb = VerifierBatches(vsamp, tok, plen(vsamp)) if vsamp else None
    model = build_model(v.model, tok, v.seed)
    tcfg = replace(v.train, seed=v.seed)
    ids = {"y_id": vb.yn["Y"], "n_id": vb.yn["N"]}

    def evaluate():
        model.eval()
        s, y = mark_scores(model, vvb)
        r = {"val_auroc": auroc(s, y), "val_pos_rate": sum(y) / len(y)}
        if vsb is not None:  # the policies' own (held-out) samples: the distribution the table scores
            s, y = mark_scores(model, vsb)
            r.update(val_auroc_sampled=auroc(s, y), val_pos_rate_sampled=sum(y) / len(y))
        model.train()
        return r

    rows = train(model, lambda s: {**vb.batch(s, tcfg.batch_size, tcfg.seed), **ids}, tcfg,
                 eval_fn=evaluate, desc="verifier", loss_fn=verifier_loss)
    final = evaluate()
    info = {"name": "verifier", "role": "verifier", "n_params": sum(p.numel() for p in model.parameters()),
            "log": rows, "n_train_sequences": len(ex),
            "n_sampled_sequences": len(samp), **final}
    torch.set_grad_enabled(False)
    save_model(model, tok, out, {"pool_member.json": strict_dumps(info, indent=1)})
    return info


def load(path: str | Path):
    """(model, tokenizer, info) of a pool member directory (a hub member loads its hub id)."""
    from methods.core.models import load_model

    p = Path(path)
    if not (p / "pool_member.json").is_file():
        raise InputError(f"not a pool member directory (no pool_member.json): {p}")
    info = read_json(p / "pool_member.json")
    model, tok = load_model(info.get("hub") or p)
    return model, tok, info


# ---- costs ------------------------------------------------------------------------------
def arch(model) -> dict:
    """The numbers the cost formulas need, from an HF config."""
    c = model.config
    hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return {"P": sum(p.numel() for p in model.parameters()), "L": c.num_hidden_layers,
            "d_model": c.hidden_size, "n_q": c.num_attention_heads,
            "n_kv": c.num_key_value_heads or c.num_attention_heads, "head_dim": hd,
            "d_ff": c.intermediate_size, "vocab": c.vocab_size}


def analytic_forward_flops(a: dict, n: int, batch: int = 1) -> int:
    """Matmul FLOPs (2·m·k·n per matmul, FlopCounterMode's convention) of one full forward pass
    of `batch` sequences of n tokens: per layer the q/k/v/o projections, QKᵀ and AV (full n×n,
    as the dense kernel computes it), the three SwiGLU matrices; then the LM head."""
    d, hd, L = a["d_model"], a["head_dim"], a["L"]
    q_out, kv_out = a["n_q"] * hd, a["n_kv"] * hd
    proj = 2 * n * d * (q_out + 2 * kv_out) + 2 * n * q_out * d
    attn = 2 * 2 * n * n * hd * a["n_q"]
    mlp = 3 * 2 * n * d * a["d_ff"]
    return batch * (L * (proj + attn + mlp) + 2 * n * d * a["vocab"])


def counted_forward_flops(model, n: int, batch: int = 1) -> int:
    """FLOPs of one forward pass as torch's FlopCounterMode counts them (eager attention, so
    that QKᵀ and AV are plain matmuls it sees)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    impl = model.config._attn_implementation
    model.config._attn_implementation = "eager"
    ids = torch.randint(3, model.config.vocab_size, (batch, n), generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            model(input_ids=ids, use_cache=False)
    finally:
        model.config._attn_implementation = impl
    return int(fc.get_total_flops())


def wall_per_token(model, n: int, batch: int, repeats: int) -> float:
    """Median seconds per token of a forward pass over batch×n tokens (sdpa, no grad)."""
    import torch

    ids = torch.randint(3, model.config.vocab_size, (batch, n), generator=torch.Generator().manual_seed(1))
    times = []
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(input_ids=ids, use_cache=False)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) / (batch * n)


def measure_costs(cfg: PoolConfig, dirs: dict[str, str]) -> dict:
    """pool_costs.json: per member, the architecture numbers, analytic vs counted FLOPs per token
    at ctx_len, and measured wall time per token. Members are timed in one process, interleaved
    over repeats is not needed at this size (each member's median of `repeats`)."""
    out = {"ctx_len": cfg.cost.ctx_len, "members": {}}
    for name, path in dirs.items():
        model, _, info = load(path)
        a = arch(model)
        n = cfg.cost.ctx_len
        ana = analytic_forward_flops(a, n) / n
        cnt = counted_forward_flops(model, n) / n
        out["members"][name] = {**a, "role": info.get("role", "policy"), "hub": info.get("hub"),
                                "mix_arith": info.get("mix_arith"),
                                "flops_per_token_analytic": ana, "flops_per_token_counted": cnt,
                                "flops_rel_err": abs(ana - cnt) / cnt,
                                "wall_s_per_token": wall_per_token(model, n, cfg.cost.batch, cfg.cost.repeats)}
    return out
