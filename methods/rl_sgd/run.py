"""DAG steps that train: prompts, warm start, one GRPO run, sparsity, SFT contrast."""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from methods.core.config import NonNegInt, PosInt
from methods.core.results import InputError, read_json, write_json, write_jsonl

from . import task
from .config import ArchConfig, PromptsConfig, SFTConfig, WarmstartConfig


@dataclass
class WarmConfig(WarmstartConfig):
    """The `warmstart` section plus the widths (the workflow merges them in): `steps[i]` is the
    warm start of `widths[i]`."""
    widths: list[PosInt]


@dataclass
class SFTStepConfig(SFTConfig):
    """The `sft` section plus the seeds (`rl_sgd.seeds`, merged in by the workflow): the contrast
    runs every optimizer once per seed, as the RL ablations do at the widest width."""
    seeds: list[NonNegInt]


def prompts(cfg: PromptsConfig, out: str) -> dict:
    """Train / held-out pairs of both tasks (jsonl of [a, b]; held-out disjoint)."""
    try:
        add_tr, add_ev = task.split_pairs(cfg.max_operand, cfg.n_eval, cfg.seed, "add")
        mul_tr, mul_ev = task.split_pairs(cfg.mul_max_a, cfg.mul_n_eval, cfg.seed + 1, "mul")
    except ValueError as e:
        raise InputError(f"prompts: {e}") from None
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    files = {"sft_train": add_tr, "rl_prompts": add_tr, "eval": add_ev, "mul_train": mul_tr, "mul_eval": mul_ev}
    for name, pairs in files.items():
        write_jsonl(d / f"{name}.jsonl", [{"a": a, "b": b} for a, b in pairs])
    return {k: len(v) for k, v in files.items()}


def read_pairs(data: str, name: str) -> list[tuple[int, int]]:
    f = Path(data) / f"{name}.jsonl"
    if not f.is_file():
        raise InputError(f"missing prompt file {f} (run the prompts step)")
    return [(r["a"], r["b"]) for r in map(json.loads, f.read_text().splitlines())]


def _arch(a: ArchConfig, width: int):
    from .model import TinyConfig

    if width % a.n_heads:
        raise InputError(f"width {width} is not divisible by arch.n_heads {a.n_heads}")
    return TinyConfig(vocab_size=len(task.VOCAB), d_model=width, n_layers=a.n_layers, n_heads=a.n_heads,
                      d_ff=int(round(a.ff_mult * width)), max_seq_len=a.max_seq_len, init_std=a.init_std)


def _log(row):
    print(json.dumps(row), file=sys.stderr)


def warmstart(cfg: WarmConfig, width: int, data: str, out: str) -> dict:
    import torch

    from . import model as M, optim, sft
    from .grpo import accuracy

    if width not in cfg.widths:
        raise InputError(f"warmstart: width {width} not in widths {cfg.widths}")
    steps = cfg.steps[cfg.widths.index(width)]
    torch.manual_seed(cfg.seed)
    m = M.TinyLM(_arch(cfg.arch, width))
    opt = optim.make("adamw", m.parameters(), cfg.lr)
    rows = sft.train(m, opt, read_pairs(data, "sft_train"), "add", steps, cfg.batch_size, cfg.seed, _log)
    M.round_to_bf16(m)  # the base is exactly bf16-representable
    acc = accuracy(m, read_pairs(data, "eval"))
    meta = {"width": width, "steps": steps, "n_params": M.n_params(m), "base_acc": acc, "final_loss": rows[-1]["loss"]}
    M.save(m, out, meta)
    return meta


def grpo_run(gcfg: dict, opt_name: str, lr: float, seed: int, base: str, data: str, out: str) -> dict:
    import torch

    from methods.core.config import from_dict

    from . import grpo, model as M, optim
    from .config import GRPOConfig

    cfg = from_dict(GRPOConfig, gcfg, "grpo")
    t0 = time.perf_counter()
    m = M.load(base)
    meta = json.loads((Path(base) / "meta.json").read_text())
    torch.manual_seed(seed)
    try:
        opt = optim.make(opt_name, m.parameters(), lr, cfg.betas, cfg.weight_decay, cfg.momentum)
    except ValueError as e:
        raise InputError(str(e)) from None
    rows = grpo.run(m, opt, cfg, seed, read_pairs(data, "rl_prompts"), _log)
    acc = grpo.accuracy(m, read_pairs(data, "eval"))
    s = {"optimizer": opt_name, "lr": lr, "seed": seed, "width": meta["width"], "n_params": M.n_params(m),
         "base_acc": meta["base_acc"], "acc": acc, "state_bytes": optim.state_bytes(opt),
         "mean_reward_last10": sum(r["reward"] for r in rows[-10:]) / len(rows[-10:]),
         "wall_s": time.perf_counter() - t0, "config": gcfg}
    M.save(m, out, s)
    write_jsonl(Path(out) / "log.jsonl", rows)
    write_json(Path(out) / "summary.json", s)
    return s


def sparsity_all(runs: list[str], bases: list[str], with_rank: bool = True) -> dict:
    from . import model as M
    from .sparsity import analyse

    base_by_w = {}
    for b in bases:
        base_by_w[json.loads((Path(b) / "meta.json").read_text())["width"]] = M.state_dict_of(b)
    res = {}
    for r in runs:
        s = read_json(Path(r) / "summary.json")
        if s["width"] not in base_by_w:
            raise InputError(f"sparsity: no base of width {s['width']} for run {r}")
        res[Path(r).name] = {"summary": {k: v for k, v in s.items() if k != "config"},
                             **analyse(base_by_w[s["width"]], M.state_dict_of(r), with_rank)}
    return res


def sft_contrast(cfg: SFTStepConfig, base: str, data: str) -> dict:
    """Continue the base with each optimizer on multiplication (SFT), fixed LR per optimizer,
    once per seed (the seed draws the batches). {"base_acc", "seeds": {seed: {optimizer: ...}}}."""
    import torch

    from . import model as M, optim, sft
    from .grpo import accuracy

    if not cfg.seeds:
        raise InputError("sft: no seeds given")
    train_p, eval_p = read_pairs(data, "mul_train"), read_pairs(data, "mul_eval")
    base_model = M.load(base)
    out = {"base_acc": accuracy(base_model, eval_p, "mul"), "seeds": {}}
    for seed in cfg.seeds:
        per = out["seeds"][str(seed)] = {}
        for name, lr in dataclasses.asdict(cfg.lrs).items():
            m = M.load(base)
            torch.manual_seed(seed)
            try:
                opt = optim.make(name, m.parameters(), float(lr))
            except ValueError as e:
                raise InputError(f"sft.lrs: {e}") from None
            rows = sft.train(m, opt, train_p, "mul", cfg.steps, cfg.batch_size, seed, None)
            per[name] = {"lr": float(lr), "acc": accuracy(m, eval_p, "mul"), "final_loss": rows[-1]["loss"]}
            _log({"sft": name, "seed": seed, **per[name]})
    return out
