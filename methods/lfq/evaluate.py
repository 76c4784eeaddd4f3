"""Evaluation of the FP model and its quantized variants (arXiv 2605.29756; tiny metrics ours).

Per model: token-level perplexity on held-out PCFG text (tiny) or WikiText-2 test at the
paper's seqlen (paper scale, `ppl_source`); mean KL(p_FP‖p_Q) per token and top-1 agreement
with the FP model on `n_kl_seqs` held-out windows; greedy exact match of the running sum by
output length (the first k generated digits, k in `buckets`) and the mean first position where
the greedy output departs from the FP model's; lm-eval tasks where they fit (`lm_eval_tasks`:
tiny exports the full-length running sum as a `generate_until` task, kept next to its data in
the results' `lm_eval_tasks/` folder for `lm_eval --include_path`; paper names lm-eval's own
mmlu / ifeval / gsm8k). The FP model is loaded once and every variant compared to it in memory.
"""
from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from methods.core.data import TokenStream
from methods.core.evaluate import export_task, run_lm_eval
from methods.core.models import load_model
from methods.core.results import InputError, atomic_path, read_jsonl

from .config import SUM_TASK, EvalConfig


def _ppl_text(cfg: EvalConfig, data_dir: Path) -> str:
    if cfg.ppl_source is None:
        # PCFG sentences of the validation split (running-sum lines start with "s<digit>")
        return "\n".join(l for l in (data_dir / "val.txt").read_text().splitlines()
                         if not re.match(r"s\d", l)) + "\n"
    import datasets

    try:
        ds = datasets.load_dataset(cfg.ppl_source, cfg.ppl_subset, split="test")
    except Exception as e:  # hub errors come in many types; one line is enough
        raise InputError(f"cannot load {cfg.ppl_source!r}: {str(e).splitlines()[0]}") from None
    return "\n\n".join(ds["text"])


@torch.no_grad()
def _logits(model, batches):
    return [model(input_ids=b["input_ids"]).logits.float() for b in batches]


@torch.no_grad()
def _ppl(model, batches) -> float:
    nll, n = 0.0, 0
    for b in batches:
        logits = model(input_ids=b["input_ids"]).logits.float()
        nll += float(F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), reduction="sum"))
        n += b["labels"].numel()
    return math.exp(nll / n)


def kl_and_agreement(fp_logits, q_logits) -> tuple[float, float]:
    """Mean over tokens of KL(p_FP‖p_Q) (nats) and of [argmax p_FP == argmax p_Q]."""
    kl, agree, n = 0.0, 0.0, 0
    for zf, zq in zip(fp_logits, q_logits):
        lf, lq = F.log_softmax(zf, -1).flatten(0, 1), F.log_softmax(zq, -1).flatten(0, 1)
        kl += float(F.kl_div(lq, lf, log_target=True, reduction="sum"))
        agree += float((lf.argmax(-1) == lq.argmax(-1)).sum())
        n += lf.shape[0]
    return kl / n, agree / n


def kl_and_agreement_per_seq(fp_logits, q_logits) -> tuple[list[float], list[float]]:
    """Per held-out sequence: mean over its tokens of KL(p_FP‖p_Q) and of top-1 agreement (the
    units the analysis resamples for its intervals; every sequence has seq_len tokens, so the
    mean of these equals `kl_and_agreement`'s token means)."""
    kl, agree = [], []
    for zf, zq in zip(fp_logits, q_logits):
        lf, lq = F.log_softmax(zf, -1), F.log_softmax(zq, -1)
        kl += (lf.exp() * (lf - lq)).sum(-1).mean(-1).tolist()
        agree += (lf.argmax(-1) == lq.argmax(-1)).float().mean(-1).tolist()
    return kl, agree


@torch.no_grad()
def greedy(model, tok, prompts: list[str], n_new: int, batch: int) -> list[list[int]]:
    """Greedy continuations (token ids) of every prompt; prompts of equal token length are
    batched together so no padding enters the model."""
    enc = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    out = [None] * len(prompts)
    by_len = {}
    for i, e in enumerate(enc):
        by_len.setdefault(len(e), []).append(i)
    for idx in by_len.values():
        for c in range(0, len(idx), batch):
            rows = idx[c:c + batch]
            ids = torch.tensor([enc[i] for i in rows])
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                                 min_new_tokens=n_new, do_sample=False, pad_token_id=tok.pad_token_id)
            for i, g in zip(rows, gen[:, ids.shape[1]:].tolist()):
                out[i] = g
    return out


def _first_divergence(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def export_tasks(cfg: EvalConfig, tokenizer, data_dir, out_dir) -> bool:
    """Write the lm-eval task folder `out_dir` (atomically; `lm_eval --include_path <out_dir>`
    reruns the evaluation): with `lm_eval_tasks` = [SUM_TASK], the full-length running sum as a
    `generate_until` task next to its data (methods.core.evaluate; greedy until the newline, one
    token more than the answer under `tokenizer`); else (lm-eval's registered tasks, or none) an
    empty folder. Returns whether the task was exported."""
    data_dir = Path(data_dir)
    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.lm_eval_tasks != [SUM_TASK]:
            return False
        recs = read_jsonl(data_dir / "sum_eval.jsonl")
        n_new = len(tokenizer(recs[0]["answer"], add_special_tokens=False)["input_ids"])
        export_task(tmp, SUM_TASK, data_dir / "sum_eval.jsonl", "generate_until", max_gen_toks=n_new + 1, stop="\n")
    return True


def evaluate_models(cfg: EvalConfig, fp_dir, model_dirs: list, data_dir, tasks_dir=None) -> list[dict]:
    """Every metric of the module docstring for the FP model and each of `model_dirs`. lm-eval
    reads our exported task from `tasks_dir` (`export_tasks`; None: exported to a temporary
    folder here)."""
    data_dir = Path(data_dir)
    fp, tok = load_model(fp_dir)
    recs = read_jsonl(data_dir / "sum_eval.jsonl")
    n_digits = len(recs[0]["answer"])
    if cfg.buckets[-1] > n_digits:
        raise InputError(f"config key 'buckets': {cfg.buckets[-1]} exceeds the {n_digits} answer digits")
    val = TokenStream.from_text((data_dir / "val.txt").read_text(), tok, cfg.seq_len)
    kl_batches = val.sequential_batches(cfg.batch_size, math.ceil(cfg.n_kl_seqs / cfg.batch_size))
    ppl_batches = TokenStream.from_text(_ppl_text(cfg, data_dir), tok, cfg.seq_len).sequential_batches(
        cfg.batch_size, math.ceil(cfg.n_ppl_seqs / cfg.batch_size))
    fp_logits = _logits(fp, kl_batches)
    prompts = [r["prompt"] for r in recs]
    # the answer's digits are single tokens under the char tokenizer; decode + strip otherwise
    n_new = len(tok(recs[0]["answer"], add_special_tokens=False)["input_ids"])
    fp_gen = greedy(fp, tok, prompts, n_new, cfg.batch_size)
    rows = []
    with tempfile.TemporaryDirectory() as td:
        include = None
        if cfg.lm_eval_tasks == [SUM_TASK]:
            if tasks_dir is None:
                tasks_dir = Path(td) / "lm_eval_tasks"
                export_tasks(cfg, tok, data_dir, tasks_dir)
            elif not (Path(tasks_dir) / f"{SUM_TASK}.yaml").is_file():
                raise InputError(f"no {SUM_TASK}.yaml in {tasks_dir} (written by `python -m methods.lfq export-tasks`)")
            include = str(tasks_dir)
        for d in [fp_dir, *model_dirs]:
            model = fp if d == fp_dir else load_model(d)[0]
            gen = fp_gen if d == fp_dir else greedy(model, tok, prompts, n_new, cfg.batch_size)
            text = [tok.decode(g).replace(" ", "") for g in gen]
            row = {"model": Path(d).name, "ppl": _ppl(model, ppl_batches)}
            if d == fp_dir:
                row["kl"], row["top1_agree"] = 0.0, 1.0
            else:
                q_logits = _logits(model, kl_batches)
                row["kl"], row["top1_agree"] = kl_and_agreement(fp_logits, q_logits)
                # per sequence (and per prompt below): the units of the analysis's bootstrap intervals
                row["kl_seq"], row["top1_seq"] = kl_and_agreement_per_seq(fp_logits, q_logits)
            row["em_hits"] = {}
            for k in cfg.buckets:
                hits = [int(t[:k] == r["answer"][:k]) for t, r in zip(text, recs)]
                row[f"em_{k}"] = sum(hits) / len(recs)
                row["em_hits"][str(k)] = hits
            row["first_divergence"] = sum(_first_divergence(g, f) for g, f in zip(gen, fp_gen)) / len(gen)
            if cfg.lm_eval_tasks:
                res = run_lm_eval(model, tok, cfg.lm_eval_tasks, include, cfg.batch_size, limit=cfg.lm_eval_limit)
                row["lm_eval"] = res["results"]
            rows.append(row)
    return rows
