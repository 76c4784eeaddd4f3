"""CLI of the RaBitQCache study: one sub-command per DAG step.

    python -m methods.rabitqcache <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml` (capture and sparse-eval get
their section plus the shared `method` settings).
"""
from __future__ import annotations

import functools
import json
import sys
import time

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import write_metrics


def _data(a):
    from .config import DataConfig
    from .data import build

    print(f"data: {build(from_json(DataConfig, a.config, 'data'), a.out)}", file=sys.stderr)


def _train(a):
    from .base import train_base
    from .config import BaseConfig

    cli.set_threads(a.threads)
    print(f"train: {train_base(from_json(BaseConfig, a.config, 'base'), a.data, a.out)}", file=sys.stderr)


def _capture(a):
    from methods.core.config import from_dict

    from .config import CaptureConfig, SparseConfig
    from .run import capture, save_capture

    cli.set_threads(a.threads)
    raw = json.loads(a.config)
    method = from_dict(SparseConfig, raw.pop("method", {}), "method")
    cap = capture(from_dict(CaptureConfig, raw, "capture"), a.model, a.data, method)
    save_capture(cap, a.out)
    first = cap[min(cap)]
    print(f"capture: layers {sorted(cap)}, q {tuple(first['q'].shape)}, k {tuple(first['k'].shape)}", file=sys.stderr)


def _estimator(a):
    from .run import load_capture
    from .stats import StatsConfig, estimator_stats

    cli.set_threads(a.threads)
    cfg = from_json(StatsConfig, a.config, "estimator")
    t0 = time.perf_counter()
    stats = estimator_stats(load_capture(a.capture), cfg)
    write_metrics(a.out, stats, json.loads(a.config), cfg.seed, time.perf_counter() - t0)


def _sparse(a):
    from .run import SparseEvalConfig, sparse_eval

    cli.set_threads(a.threads)
    cfg = from_json(SparseEvalConfig, a.config, "sparse")
    t0 = time.perf_counter()
    res = sparse_eval(cfg, a.model, a.data)
    write_metrics(a.out, res, json.loads(a.config), cfg.method.rotation_seed, time.perf_counter() - t0)


def _lm_eval(a):
    from .run import LmEvalConfig, lm_eval_sparse

    cli.set_threads(a.threads)
    cfg = from_json(LmEvalConfig, a.config, "lm_eval")
    t0 = time.perf_counter()
    write_metrics(a.out, lm_eval_sparse(cfg, a.model), json.loads(a.config), None, time.perf_counter() - t0)


def _report(a):
    from .analysis import AnalysisConfig, report

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    report(cfg, a.estimator, a.sparse, a.lm_eval, a.table, a.summary, a.figure)


def build_parser():
    p, sub = cli.subcommands("rabitqcache", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "generate passkey / multi-key retrieval texts and the word tokenizer", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("train", _train, "train (paper scale: fetch) the model", "data", "out", threads=True)
    step("capture", _capture, "decode-time post-RoPE q/K/V and dense probabilities", "model", "data", "out",
         threads=True)
    step("estimator", _estimator, "bias, RMSE, bound coverage, ⟨ō,o⟩ on captured pairs", "capture", "out",
         threads=True)
    step("sparse", _sparse, "generation through every selection method: recall, budget, EM", "model", "data",
         "out", threads=True)
    step("lm_eval", _lm_eval, "lm-eval tasks with the sparse attention attached", "model", "out", threads=True)
    s = step("report", _report, "table, claim metrics pooled over the models, figure", "estimator", "table",
             "summary", "figure")
    s.add_argument("--sparse", nargs="+", required=True, help="one sparse-eval result per trained model (seed)")
    s.add_argument("--lm-eval", dest="lm_eval", nargs="*", default=[])
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
