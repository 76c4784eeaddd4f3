"""CLI of the rl_sgd study (SGD vs AdamW in RLVR): one sub-command per DAG step.

    python -m methods.rl_sgd <step> --config '<json>' [files...]
"""
from __future__ import annotations

import functools
import json
import sys
import time

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, read_json, write_metrics


def _prompts(a):
    from .config import PromptsConfig
    from .run import prompts

    print(f"prompts: {prompts(from_json(PromptsConfig, a.config, 'prompts'), a.out)}", file=sys.stderr)


def _warmstart(a):
    from .run import WarmConfig, warmstart

    cli.set_threads(a.threads)
    meta = warmstart(from_json(WarmConfig, a.config, "warmstart"), a.width, a.data, a.out)
    print(f"warmstart: {meta}", file=sys.stderr)


def _grpo(a):
    from .run import grpo_run

    cli.set_threads(a.threads)
    cfg = json.loads(a.config)
    if not isinstance(cfg, dict):
        raise InputError("grpo: --config must be a JSON object")
    s = grpo_run(cfg, a.optimizer, a.lr, a.seed, a.base, a.data, a.out)
    print(f"grpo: acc {s['base_acc']:.3f} -> {s['acc']:.3f}", file=sys.stderr)


def _sparsity(a):
    from .run import sparsity_all

    cli.set_threads(a.threads)
    t0 = time.perf_counter()
    res = sparsity_all(a.runs, a.bases, bool(json.loads(a.config).get("rank", True)))
    write_metrics(a.out, {"runs": res}, json.loads(a.config), None, time.perf_counter() - t0)


def _sft(a):
    from .run import SFTStepConfig, sft_contrast

    cli.set_threads(a.threads)
    t0 = time.perf_counter()
    cfg = from_json(SFTStepConfig, a.config, "sft")
    write_metrics(a.out, sft_contrast(cfg, a.base, a.data), json.loads(a.config), None, time.perf_counter() - t0)


def _trl_check(a):
    from .config import TrlCheckConfig
    from .trl_check import compare

    cli.set_threads(a.threads)
    t0 = time.perf_counter()
    cfg = from_json(TrlCheckConfig, a.config, "trl_check")
    write_metrics(a.out, compare(cfg), json.loads(a.config), cfg.seed, time.perf_counter() - t0)


def _aggregate(a):
    from .analysis import AnalysisConfig, aggregate

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    aggregate(cfg, read_json(a.sparsity)["runs"], read_json(a.sft), read_json(a.trl), a.table, a.summary,
              a.fig_acc, a.fig_width)


def build_parser():
    p, sub = cli.subcommands("rl_sgd", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    step("prompts", _prompts, "train / RL / held-out prompt pairs of both tasks", "out")
    s = step("warmstart", _warmstart, "AdamW SFT warm start of one width (bf16-rounded)", "data", "out",
             threads=True)
    s.add_argument("--width", type=int, required=True)
    s = step("grpo", _grpo, "one GRPO run (optimizer, lr, seed) from a base", "base", "data", "out", threads=True)
    s.add_argument("--optimizer", required=True)
    s.add_argument("--lr", type=float, required=True)
    s.add_argument("--seed", type=int, required=True)
    s = step("sparsity", _sparsity, "bf16/fp32 changed fractions and update rank of every run", "out",
             threads=True)
    s.add_argument("--runs", nargs="+", required=True)
    s.add_argument("--bases", nargs="+", required=True)
    step("sft", _sft, "SFT-continuation contrast (multiplication) per optimizer", "base", "data", "out",
         threads=True)
    step("trl_check", _trl_check, "first GRPO update: our loop vs trl GRPOTrainer", "out", threads=True)
    step("aggregate", _aggregate, "table, claim metrics and figures", "sparsity", "sft", "trl", "table",
         "summary", "fig_acc", "fig_width")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
