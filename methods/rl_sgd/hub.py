"""The hub path of the rl_sgd study (arXiv 2602.07729): GRPO with AdamW or SGD on hub math LMs
(`hub.models`), on the problems of `hub.rl_dataset` (DeepScaleR: `problem`, `answer`,
`solution`), with the verifiable reward of the tiny task carried over to math: 1 iff the
completion's final answer — the content of its last `\\boxed{...}` — equals the reference answer
(checked by `math_verify`, the verifier lm-eval's minerva_math uses), else 0.

Same algorithm and step code as the tiny loop (`grpo.run` / `grpo.grpo_step`): prompts drawn as a
pure function of (seed, step), G samples each at temperature T, `core.rl.group_advantages`,
optional zero-variance skipping, ONE on-policy update of `grpo.loss_of` (`core.rl.grpo_loss`,
token or sequence normalisation) with the optimizers of `optim.make`. What differs is what a hub
model needs: variable-length chat prompts (`core.rl.generate`: left-padded HF generate with the KV
cache; `core.rl.sequence_logprobs`: right-padded scoring), gradient accumulation over
`grpo.micro_batch` sequences (each micro-batch's loss weighted by its share of the batch's
tokens, or sequences, so the update equals the whole-batch one), fp32 master weights with the
runtime's autocast, and checkpoints as `save_pretrained` directories (the base in bf16, as the
hub ships it; each run in its fp32 master weights, so the sparsity step can compare both bf16 and
fp32 entries). We run our own GRPO loop, not verl (a common RLVR framework; the paper's own was not verified).

Held-out accuracy: greedy decoding on every `hub.eval_datasets` entry (`datasets`), the mean
over datasets (the accuracy of the claims); the `hub.lm_eval_tasks` are scored through lm-eval on
every base and run by one `lm_eval` step (`lm_eval.py`; reported beside the claims).
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from methods.core.answers import last_boxed
from methods.core.config import NonNegInt, PosInt
from methods.core.results import InputError, dumps as strict_dumps, read_json, write_json, write_jsonl

from .config import DataConfig, EvalConfig, GRPOConfig, SFTConfig

# DeepScaleR's instruction (agentica-org/rllm, deepscaler's math prompt), after the problem
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
END_OF_TURN = ("<|im_end|>", "<|eot_id|>")   # chat-turn ends of the Qwen and Llama-3 families


@dataclass
class PromptsStep:
    """The `data` section plus the hub datasets (the workflow merges them in)."""
    data: DataConfig
    rl_dataset: str
    eval_datasets: list[str]


@dataclass
class BaseStep:
    """One base: hub model `hub_id` under the DAG key `key` (m<i>: model i of hub.models)."""
    hub_id: str
    key: str
    eval: EvalConfig


@dataclass
class GRPOStep:
    grpo: GRPOConfig
    eval: EvalConfig


@dataclass
class SFTStep:
    """The SFT contrast from the main base: the `sft` section, the seeds, held-out decoding and
    the longest solution (in tokens) trained on."""
    sft: SFTConfig
    seeds: list[NonNegInt]
    eval: EvalConfig
    max_len: PosInt
    micro_batch: PosInt | None = None


def _log(row):
    print(json.dumps(row), file=sys.stderr, flush=True)


# ------------------------------------------------------------------- answers, reward ----
def reward(completion: str, answer: str) -> float:
    """1.0 iff the completion's last boxed answer equals `answer` (math_verify), else 0.0."""
    pred = last_boxed(completion)
    if pred is None or not pred.strip():
        return 0.0
    from math_verify import parse, verify  # sympy: imported once a completion has an answer to check

    gold = parse(f"\\boxed{{{answer}}}")
    if not gold:  # an answer math_verify cannot parse: exact string match
        return float(pred.strip() == str(answer).strip())
    return float(verify(gold, parse(f"\\boxed{{{pred}}}")))


# ----------------------------------------------------------------------------- data ----
def _split_of(source: str, prefer: tuple[str, ...]) -> str:
    from methods.core.data import dataset_splits

    splits = dataset_splits(source)
    for s in prefer:
        if s in splits:
            return s
    raise InputError(f"dataset {source!r} has none of the splits {list(prefer)} (has {splits})")


def _problems(source: str, split: str, n: int | None, seed: int, need_solution: bool = False) -> list[dict]:
    """{problem, answer[, solution]} records of a math dataset: `answer` from its `answer` field,
    else the last boxed answer of its `solution` (MATH); `n` drawn without replacement."""
    from methods.core.data import load_records

    rows = load_records(source, split)
    if not rows:
        raise InputError(f"dataset {source!r} split {split!r} is empty")
    fields = set(rows[0])
    if "problem" not in fields:
        raise InputError(f"dataset {source!r} has no field 'problem' (has {sorted(fields)})")
    if "answer" not in fields and "solution" not in fields:
        raise InputError(f"dataset {source!r} has neither an 'answer' nor a 'solution' field (has {sorted(fields)})")
    if need_solution and "solution" not in fields:
        raise InputError(f"dataset {source!r} has no field 'solution' (the SFT contrast trains on it)")
    out = []
    for r in rows:
        ans = r.get("answer")
        ans = last_boxed(r.get("solution") or "") if ans is None or str(ans).strip() == "" else str(ans)
        if ans is None or not str(r.get("problem") or "").strip():
            continue
        rec = {"problem": r["problem"], "answer": ans}
        if need_solution:
            rec["solution"] = r.get("solution") or ""
        out.append(rec)
    if not out:
        raise InputError(f"dataset {source!r} split {split!r} has no problem with an answer")
    if n is not None and n < len(out):
        out = random.Random(seed).sample(out, n)
    return out


def prompts(cfg: PromptsStep, out: str) -> dict:
    """data/: rl_prompts.jsonl (problem, answer), sft_train.jsonl (problem, answer, solution; rows
    with a worked solution), eval_<i>.jsonl per `eval_datasets` entry and evals.json naming them."""
    from methods.core.results import atomic_path

    d = cfg.data
    train = _problems(cfg.rl_dataset, _split_of(cfg.rl_dataset, ("train",)), d.n_train, d.seed, need_solution=True)
    sft = [r for r in train if r["solution"].strip()]
    if not sft:
        raise InputError(f"dataset {cfg.rl_dataset!r}: no row has a worked 'solution' (the SFT contrast needs one)")
    evals = []
    for i, src in enumerate(cfg.eval_datasets):
        recs = _problems(src, _split_of(src, ("test", "train")), d.n_eval, d.seed + 1 + i)
        evals.append((f"eval_{i}", src, recs))
    counts = {"rl_prompts": len(train), "sft_train": len(sft)}
    with atomic_path(out, is_dir=True) as tmp:
        write_jsonl(tmp / "rl_prompts.jsonl", [{"problem": r["problem"], "answer": r["answer"]} for r in train])
        write_jsonl(tmp / "sft_train.jsonl", sft)
        for name, src, recs in evals:
            write_jsonl(tmp / f"{name}.jsonl", recs)
            counts[name] = len(recs)
        write_json(tmp / "evals.json", {"evals": [{"name": n, "source": s, "n": len(r)} for n, s, r in evals]})
    return counts


def read_records(data: str, name: str) -> list[dict]:
    f = Path(data) / f"{name}.jsonl"
    if not f.is_file():
        raise InputError(f"missing problem file {f} (run the prompts step)")
    return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------- models ----
def prompt_ids(tok, problem: str) -> list[int]:
    """The problem with DeepScaleR's instruction as one user turn of the model's chat template
    (plain text where it has none), ready for the assistant's answer."""
    text = f"{problem} {INSTRUCTION}"
    if getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                       tokenize=False)
    return tok(text, add_special_tokens=False)["input_ids"]


def stop_ids(model, tok) -> tuple[list[int], int]:
    """(ids that end a completion, pad id): the model's and tokenizer's EOS and the chat-turn end
    of its family; pad = the tokenizer's pad, else the first of them."""
    ids = set()
    gen = getattr(model, "generation_config", None)
    for e in (getattr(gen, "eos_token_id", None), tok.eos_token_id):
        ids.update([e] if isinstance(e, int) else (e or []))
    vocab = tok.get_vocab()
    ids.update(vocab[t] for t in END_OF_TURN if t in vocab)
    if not ids:
        raise InputError(f"model {getattr(model.config, '_name_or_path', '?')}: no EOS token in its tokenizer or "
                         "generation config (a completion could not end)")
    stops = sorted(ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else stops[0]
    return stops, pad


def load(path: str, training: bool, dtype=None):
    from methods.core.models import load_model

    model, tok = load_model(path, dtype=dtype, training=training)
    if not hasattr(model, "generate") or model.get_output_embeddings() is None:
        raise InputError(f"model {path}: not a causal LM with an output head")
    return model, tok


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------- evaluation ----
def accuracy(model, tok, recs: list[dict], ecfg: EvalConfig) -> float:
    """Greedy decoding (at most `max_new` tokens), mean reward over `recs`."""
    import torch

    from methods.core import rl
    from methods.core.runtime import current

    stops, pad = stop_ids(model, tok)
    model.eval()
    with torch.no_grad(), current().autocast(training=True):
        comps = rl.generate(model, [prompt_ids(tok, r["problem"]) for r in recs], ecfg.max_new, eos_ids=stops,
                            pad_id=pad, greedy=True, chunk=ecfg.batch_size)
    return sum(reward(tok.decode(c, skip_special_tokens=True), r["answer"]) for c, r in zip(comps, recs)) / len(recs)


def evaluate(model, tok, data: str, ecfg: EvalConfig) -> dict:
    """{"acc": mean over the eval datasets, "acc_by_dataset": {source: acc}}; the model's dtype is
    kept (an fp32 run's master weights are saved after this)."""
    evals = read_json(Path(data) / "evals.json")["evals"]
    if not evals:
        raise InputError("no held-out problems: hub.eval_datasets is empty (the accuracy of every claim needs them)")
    by = {e["source"]: accuracy(model, tok, read_records(data, e["name"]), ecfg) for e in evals}
    return {"acc": sum(by.values()) / len(by), "acc_by_dataset": by}


# ---------------------------------------------------------------------------- steps ----
def base(cfg: BaseStep, data: str, out: str) -> dict:
    """The hub checkpoint as the base: loaded in bf16 (so the base is bf16-representable, as the
    tiny bases are rounded to bf16), scored, saved with meta.json."""
    import torch

    from methods.core.models import save_model

    if not re.fullmatch(r"m\d+", cfg.key):
        raise InputError(f"warmstart: hub base key {cfg.key!r} is not m<index>")
    model, tok = load(cfg.hub_id, training=False, dtype=torch.bfloat16)
    stop_ids(model, tok)
    t0 = time.perf_counter()
    ev = evaluate(model, tok, data, cfg.eval)
    meta = {"width": cfg.key, "hub_id": cfg.hub_id, "hidden_size": int(model.config.hidden_size),
            "n_params": n_params(model), "base_acc": ev["acc"], "acc_by_dataset": ev["acc_by_dataset"],
            "eval_s": time.perf_counter() - t0}
    save_model(model, tok, out, extra_files={"meta.json": json.dumps(meta, indent=1)})
    return meta


def grpo_step(model, opt, prompts: list[list[int]], comps: list[list[int]], rewards, cfg: GRPOConfig, pad: int):
    """One on-policy update from given completions (`grpo.grpo_step` for variable-length
    sequences, accumulated over micro-batches); returns (loss, stats)."""
    import torch

    from methods.core import rl
    from methods.core.runtime import current

    from .grpo import loss_of

    adv = rl.group_advantages(rewards, cfg.group_size, cfg.adv_eps)
    keep = torch.ones_like(rewards, dtype=torch.bool)
    if cfg.skip_zero_var:
        keep = (rewards.view(-1, cfg.group_size).std(1) > 0).repeat_interleave(cfg.group_size)
    stats = {"reward": rewards.mean().item(), "kept_groups": int(keep.sum().item()) // cfg.group_size,
             "mean_len": sum(map(len, comps)) / len(comps)}
    if not keep.any():
        return None, stats
    rows = keep.nonzero().flatten().tolist()
    seqs, starts = [prompts[i] + comps[i] for i in rows], [len(prompts[i]) for i in rows]
    total = sum(len(comps[i]) for i in rows) if cfg.loss_norm == "token" else len(rows)
    mb = cfg.micro_batch or len(rows)
    rt = current()
    model.train()
    opt.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for i in range(0, len(rows), mb):
        with rt.autocast(training=True):
            logp, mask = rl.sequence_logprobs(model, seqs[i:i + mb], starts[i:i + mb], pad)
        a = adv[rows[i:i + mb]].to(logp.device, logp.dtype)
        part = loss_of(logp, logp.detach(), a, mask, cfg)
        w = (mask.sum().item() if cfg.loss_norm == "token" else len(starts[i:i + mb])) / total
        (part * w).backward()
        loss_sum += part.item() * w
    opt.step()
    return loss_sum, stats


def run(model, tok, opt, cfg: GRPOConfig, seed: int, problems: list[dict], chunk: int, log=None) -> list[dict]:
    """The GRPO loop (`grpo.run` on hub prompts); prompts and samples are a pure function of
    (seed, step)."""
    import torch

    from methods.core import rl
    from methods.core.runtime import current

    if cfg.beta:
        raise InputError("grpo.beta > 0 needs a reference model, which the hub path does not load (set beta 0)")
    stops, pad = stop_ids(model, tok)
    rt = current()
    rows = []
    for step in range(cfg.steps):
        rng = torch.Generator().manual_seed(seed * 100003 + step)
        idx = torch.randint(len(problems), (cfg.n_prompts,), generator=rng).tolist()
        batch = [problems[i] for i in idx for _ in range(cfg.group_size)]
        ids = [prompt_ids(tok, p["problem"]) for p in batch]
        model.eval()
        torch.manual_seed(seed * 100003 + step)
        with torch.no_grad(), rt.autocast(training=True):
            comps = rl.generate(model, ids, cfg.max_new, eos_ids=stops, pad_id=pad, temperature=cfg.temperature,
                                chunk=chunk)
        rewards = torch.tensor([reward(tok.decode(c, skip_special_tokens=True), p["answer"])
                                for c, p in zip(comps, batch)])
        loss, stats = grpo_step(model, opt, ids, comps, rewards, cfg, pad)
        row = {"step": step, "loss": loss if loss is not None else math.nan, **stats}
        rows.append(row)
        if log and (step % cfg.log_every == 0 or step == cfg.steps - 1):
            log(row)
    return rows


def grpo_run(cfg: GRPOStep, opt_name: str, lr: float, seed: int, base_dir: str, data: str, out: str,
             raw: dict) -> dict:
    import torch

    from methods.core.models import save_model

    from . import optim

    t0 = time.perf_counter()
    meta = read_json(Path(base_dir) / "meta.json")
    model, tok = load(base_dir, training=True)
    torch.manual_seed(seed)
    try:
        opt = optim.make(opt_name, model.parameters(), lr, cfg.grpo.betas, cfg.grpo.weight_decay, cfg.grpo.momentum)
    except ValueError as e:
        raise InputError(str(e)) from None
    rows = run(model, tok, opt, cfg.grpo, seed, read_records(data, "rl_prompts"), cfg.eval.batch_size, _log)
    ev = evaluate(model, tok, data, cfg.eval)
    s = {"optimizer": opt_name, "lr": lr, "seed": seed, "width": meta["width"], "hub_id": meta["hub_id"],
         "hidden_size": meta["hidden_size"], "n_params": n_params(model), "base_acc": meta["base_acc"],
         "acc": ev["acc"], "acc_by_dataset": ev["acc_by_dataset"],
         "state_bytes": optim.state_bytes(opt),
         "mean_reward_last10": sum(r["reward"] for r in rows[-10:]) / len(rows[-10:]),
         "wall_s": time.perf_counter() - t0, "config": raw}
    log = "".join(strict_dumps(r) + "\n" for r in rows)
    save_model(model, tok, out, extra_files={"meta.json": strict_dumps(s, indent=1), "log.jsonl": log,
                                             "summary.json": strict_dumps(s, indent=1)})
    return s


def sft_train(model, tok, opt, recs: list[dict], steps: int, batch_size: int, seed: int, max_len: int,
              micro_batch: int | None, log=None) -> list[dict]:
    """SFT continuation (`sft.train` on worked solutions): mean NLL over the solution tokens of
    each batch (answer = solution + EOS, at most `max_len` tokens), batches a pure function of
    (seed, step), accumulated over micro-batches."""
    import torch

    from methods.core import rl
    from methods.core.runtime import current

    stops, pad = stop_ids(model, tok)
    rt = current()
    rows = []
    for step in range(steps):
        g = torch.Generator().manual_seed(seed * 100003 + step)
        idx = torch.randint(len(recs), (batch_size,), generator=g).tolist()
        seqs, starts = [], []
        for i in idx:
            p = prompt_ids(tok, recs[i]["problem"])
            a = (tok(recs[i]["solution"], add_special_tokens=False)["input_ids"] + [stops[0]])[:max_len]
            seqs.append(p + a)
            starts.append(len(p))
        total = sum(len(s) - st for s, st in zip(seqs, starts))
        mb = micro_batch or len(seqs)
        model.train()
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for i in range(0, len(seqs), mb):
            with rt.autocast(training=True):
                logp, mask = rl.sequence_logprobs(model, seqs[i:i + mb], starts[i:i + mb], pad)
            part = -(logp * mask).sum() / total
            part.backward()
            loss_sum += part.item()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            rows.append({"step": step, "loss": loss_sum})
            if log:
                log(rows[-1])
    return rows


def sft_contrast(cfg: SFTStep, base_dir: str, data: str) -> dict:
    """`run.sft_contrast` on the hub path: each optimizer once per seed from the main base, on
    the RL dataset's worked solutions; held-out accuracy as the runs'."""
    import torch

    from . import optim

    if not cfg.seeds:
        raise InputError("sft: no seeds given")
    recs = read_records(data, "sft_train")
    evals = read_json(Path(data) / "evals.json")["evals"]

    def acc(model, tok):
        by = [accuracy(model, tok, read_records(data, e["name"]), cfg.eval) for e in evals]
        return sum(by) / len(by) if by else math.nan

    m, tok = load(base_dir, training=False)
    out = {"base_acc": acc(m, tok), "seeds": {}}
    del m
    for seed in cfg.seeds:
        per = out["seeds"][str(seed)] = {}
        for name, lr in dataclasses.asdict(cfg.sft.lrs).items():
            model, tok = load(base_dir, training=True)
            torch.manual_seed(seed)
            try:
                opt = optim.make(name, model.parameters(), float(lr))
            except ValueError as e:
                raise InputError(f"sft.lrs: {e}") from None
            rows = sft_train(model, tok, opt, recs, cfg.sft.steps, cfg.sft.batch_size, seed, cfg.max_len,
                             cfg.micro_batch)
            per[name] = {"lr": float(lr), "acc": acc(model, tok), "final_loss": rows[-1]["loss"]}
            _log({"sft": name, "seed": seed, **per[name]})
            del model, opt
    return out
