"""CLI of the rl_sgd study (SGD vs AdamW in RLVR): one sub-command per DAG step.

    python -m methods.rl_sgd <step> --config '<json>' [files...]
"""
from __future__ import annotations

import functools
import json
import re
import sys
import time

from methods.core import cli
from methods.core.config import from_dict, from_json
from methods.core.results import InputError, read_json, write_metrics


def _hub_path(a) -> bool:
    """The step's config is the hub path's (the workflow nests it under `hub_path`)."""
    try:
        cfg = json.loads(a.config)
    except json.JSONDecodeError as e:
        raise InputError(f"config is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{a.command}: --config must be a JSON object")
    return "hub_path" in cfg


def _hub_cfg(cls, a, where):
    return from_dict(cls, json.loads(a.config)["hub_path"], where)


def _prompts(a):
    from . import hub
    from .config import PromptsConfig
    from .run import prompts

    if _hub_path(a):
        print(f"prompts: {hub.prompts(_hub_cfg(hub.PromptsStep, a, 'prompts'), a.out)}", file=sys.stderr)
        return
    print(f"prompts: {prompts(from_json(PromptsConfig, a.config, 'prompts'), a.out)}", file=sys.stderr)


def _warmstart(a):
    from . import hub
    from .run import WarmConfig, warmstart

    cli.set_threads(a.threads)
    if _hub_path(a):
        cfg = _hub_cfg(hub.BaseStep, a, "warmstart")
        if cfg.key != a.base_key:
            raise InputError(f"warmstart: --base_key {a.base_key} is not the config's key {cfg.key}")
        meta = hub.base(cfg, a.data, a.out)
    else:
        if not re.fullmatch(r"d\d+", a.base_key):
            raise InputError(f"warmstart: --base_key {a.base_key!r} is not d<width>")
        meta = warmstart(from_json(WarmConfig, a.config, "warmstart"), int(a.base_key[1:]), a.data, a.out)
    print(f"warmstart: {meta}", file=sys.stderr)


def _grpo(a):
    from . import hub
    from .run import grpo_run

    cli.set_threads(a.threads)
    if _hub_path(a):
        cfg = _hub_cfg(hub.GRPOStep, a, "grpo")
        s = hub.grpo_run(cfg, a.optimizer, a.lr, a.seed, a.base, a.data, a.out, json.loads(a.config))
    else:
        s = grpo_run(json.loads(a.config), a.optimizer, a.lr, a.seed, a.base, a.data, a.out)
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
    if _hub_path(a):
        from . import hub

        res = hub.sft_contrast(_hub_cfg(hub.SFTStep, a, "sft"), a.base, a.data)
    else:
        res = sft_contrast(from_json(SFTStepConfig, a.config, "sft"), a.base, a.data)
    write_metrics(a.out, res, json.loads(a.config), None, time.perf_counter() - t0)


def _trl_check(a):
    from .config import TrlCheckConfig
    from .trl_check import compare

    cli.set_threads(a.threads)
    t0 = time.perf_counter()
    cfg = from_json(TrlCheckConfig, a.config, "trl_check")
    write_metrics(a.out, compare(cfg), json.loads(a.config), cfg.seed, time.perf_counter() - t0)


def _lm_eval(a):
    from .lm_eval import LmEvalStep, lm_eval_all

    cli.set_threads(a.threads)
    t0 = time.perf_counter()
    res = lm_eval_all(from_json(LmEvalStep, a.config, "lm_eval"), a.models)
    write_metrics(a.out, res, json.loads(a.config), None, time.perf_counter() - t0)


def _aggregate(a):
    from .analysis import AnalysisConfig, aggregate

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    lm = read_json(a.lm_eval)["models"] if a.lm_eval else None
    aggregate(cfg, read_json(a.sparsity)["runs"], read_json(a.sft), read_json(a.trl), a.table, a.summary,
              a.fig_acc, a.fig_width, lm)


def build_parser():
    p, sub = cli.subcommands("rl_sgd", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("prompts", _prompts, "train / RL / held-out prompt pairs of both tasks", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    s = step("warmstart", _warmstart, "the base of one width (tiny: AdamW SFT warm start, bf16-rounded) or of "
             "one hub model (bf16, scored)", "data", "out", threads=True)
    s.add_argument("--base_key", required=True, help="d<width> (tiny) or m<index of hub.models> (hub path)")
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
    s = step("lm_eval", _lm_eval, "hub path: lm-eval tasks on every base and run", "out", threads=True)
    s.add_argument("--models", nargs="+", required=True)
    s = step("aggregate", _aggregate, "table, claim metrics and figures", "sparsity", "sft", "trl", "table",
             "summary", "fig_acc", "fig_width")
    s.add_argument("--lm_eval", default=None, help="hub path: the lm_eval step's output (reported beside the claims)")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
