"""CLI of the ASAG study: one sub-command per DAG step.

    python -m methods.asag <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml`.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, read_jsonl, write_metrics, write_text


def _data(a):
    from .config import DataConfig
    from .data import build

    print(f"data: {build(from_json(DataConfig, a.config, 'data'), a.out)}", file=sys.stderr)


def _train(a):
    from .config import TrainRunConfig
    from .train import train_tiny

    cli.set_threads(a.threads)
    cfg = from_json(TrainRunConfig, a.config, "train")
    print(f"train: {train_tiny(cfg, a.data, a.out)}", file=sys.stderr)


def _decode(a):
    from .config import DecodeConfig
    from .decode import decode_policy

    cli.set_threads(a.threads)
    cfg = from_json(DecodeConfig, a.config, "decode")
    print(f"decode: {decode_policy(a.model, Path(a.data) / 'test.jsonl', cfg, a.policy, a.out)}", file=sys.stderr)


def _report(a):
    from .analysis import claim_metrics, figure, table
    from .config import AnalysisConfig

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    t0 = time.perf_counter()
    runs = {}
    for p in a.runs:
        runs[Path(p).stem] = read_jsonl(p)
    for k in (cfg.vanilla, cfg.nothink, cfg.deer, cfg.asag):
        if k not in runs:
            raise InputError(f"report: run {k!r} missing (have {sorted(runs)})")
    tab = table(runs)
    cols = sorted({k for r in tab for k in r}, key=lambda k: (k != "policy", k))
    write_text(a.table, ",".join(cols) + "\n" + "".join(
        ",".join("" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r.get(c), float) else str(r.get(c, 0)))
                 for c in cols) + "\n" for r in tab))
    m = claim_metrics(runs, cfg)
    write_metrics(a.summary, m, json.loads(a.config), None, time.perf_counter() - t0)
    figure(runs, a.figure,
           "ASAG on synthetic over-thinking traces. Left: accuracy vs mean generated tokens per decoding "
           "policy (vanilla, NoThinking, DEER, ASAG and its ablations). Right: relative attention-entropy "
           "change ΔH at each action transition point (a generated 'Wait') of 30 vanilla traces "
           "(blue: final answer correct, red: wrong); dashed line: α = −0.1.")


def build_parser():
    p, sub = cli.subcommands("asag", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    step("data", _data, "synthetic over-thinking traces + vocabulary", "out")
    step("train", _train, "train the tiny reasoning model", "data", "out", threads=True)
    s = step("decode", _decode, "greedy decoding of the test problems under one policy",
             "model", "data", "policy", "out", threads=True)
    s = step("report", _report, "table, claim metrics, figure", "table", "summary", "figure")
    s.add_argument("--runs", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
