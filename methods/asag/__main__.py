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


def _paper(a):
    """The `paper` section (--paper), or None where the step was not given one."""
    from .config import PaperConfig

    return from_json(PaperConfig, a.paper, "paper") if a.paper else None


def _data(a):
    from .config import DataConfig
    from .data import build

    cfg = from_json(DataConfig, a.config, "data")
    paper = _paper(a)
    if paper is not None and paper.benchmarks:
        # paper scale: the paper's benchmarks through `datasets` (the synthetic traces are the tiny task)
        from .bench import build as build_benchmarks

        print(f"data: {build_benchmarks(paper.benchmarks, a.out, cfg.seed, {'seed': cfg.seed})}", file=sys.stderr)
        return
    print(f"data: {build(cfg, a.out)}", file=sys.stderr)


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
    print(f"decode: {decode_policy(a.model, Path(a.data) / 'test.jsonl', cfg, a.policy, a.out, _paper(a))}",
          file=sys.stderr)


def _report(a):
    from .analysis import claim_metrics, figure, table
    from .config import AnalysisConfig

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    t0 = time.perf_counter()
    runs = {}
    for p in a.runs:
        runs[Path(p).stem] = read_jsonl(p)
    hub = Path(a.model or "", "hub.json")
    per_model = None
    if a.model and hub.is_file():
        # paper scale: the claims are checked on the LRM the config names (train.hub_id); every
        # model's rows go to the per-model table of the summary
        from .analysis import per_model_table

        head = json.loads(hub.read_text())["hub_id"]
        per_model = per_model_table(runs)
        runs = {k: [r for r in v if r.get("model") == head] for k, v in runs.items()}
        if not all(runs.values()):
            raise InputError(f"report: no rows of the model {head!r} in the runs")
    for k in (cfg.vanilla, cfg.nothink, cfg.deer, cfg.asag):
        if k not in runs:
            raise InputError(f"report: run {k!r} missing (have {sorted(runs)})")
    tab = table(runs)
    cols = sorted({k for r in tab for k in r}, key=lambda k: (k != "policy", k))
    write_text(a.table, ",".join(cols) + "\n" + "".join(
        ",".join("" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r.get(c), float) else str(r.get(c, 0)))
                 for c in cols) + "\n" for r in tab))
    m = claim_metrics(runs, cfg)
    if per_model is not None:
        m["per_model"] = per_model
    write_metrics(a.summary, m, json.loads(a.config), None, time.perf_counter() - t0)
    figure(runs, a.figure,
           "ASAG on synthetic over-thinking traces. Left: accuracy vs mean generated tokens per decoding "
           "policy (vanilla, NoThinking, DEER, ASAG and its ablations). Right: relative attention-entropy "
           "change ΔH at each action transition point (a generated 'Wait') of 30 vanilla traces "
           "(blue: final answer correct, red: wrong); dashed line: α = −0.1.")


def build_parser():
    p, sub = cli.subcommands("asag", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "synthetic over-thinking traces + vocabulary (paper scale: the benchmarks)", "out")
    s.add_argument("--paper", default="", help="the 'paper' section as JSON (paper scale)")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("train", _train, "train the tiny reasoning model", "data", "out", threads=True)
    s = step("decode", _decode, "greedy decoding of the test problems under one policy",
             "model", "data", "policy", "out", threads=True)
    s.add_argument("--paper", default="", help="the 'paper' section as JSON (paper scale: models, think ratio)")
    s = step("report", _report, "table, claim metrics, figure", "table", "summary", "figure")
    s.add_argument("--runs", nargs="+", required=True)
    s.add_argument("--model", default="", help="the model directory (paper scale: hub.json names the LRM of the claims)")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
