"""CLI of the LFQ study: one sub-command per DAG step.

    python -m methods.lfq <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml` (the quantize and final steps
get the `quant` section plus the setting's bits and group size).
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, read_json, write_metrics


def _data(a):
    from .config import DataConfig
    from .data import build

    print(f"data: {build(from_json(DataConfig, a.config, 'data'), a.out)}", file=sys.stderr)


def _train(a):
    from .base import train_base
    from .config import BaseConfig

    cli.set_threads(a.threads)
    print(f"train: {train_base(from_json(BaseConfig, a.config, 'base'), a.data, a.out)}", file=sys.stderr)


def _calibrate(a):
    import torch

    from methods.core.results import atomic_path
    from methods.core.tokenizer import load_tokenizer

    from .config import CalibConfig
    from .data import calibration_ids

    cfg = from_json(CalibConfig, a.config, "calib")
    ids = calibration_ids(cfg, a.data, load_tokenizer(a.base))
    with atomic_path(a.out) as tmp:
        torch.save(ids, tmp)
    print(f"calibrate: {tuple(ids.shape)} token ids", file=sys.stderr)


def _load_calib(path):
    import torch

    from methods.core.safeload import load_pt

    ids = load_pt(path)
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.is_floating_point():
        raise InputError(f"calibration file {path} does not hold a 2-D tensor of token ids")
    return ids


def _quantize(a):
    from methods.core.models import load_model

    from .ptq import QuantConfig, quantize_model
    from .store import save_quantized

    cli.set_threads(a.threads)
    cfg = from_json(QuantConfig, a.config, "quant")
    # fp32 weights for calibration and the learnable clipping (the runtime's training dtype)
    model, tok = load_model(a.base, training=True)
    t0 = time.perf_counter()
    qmodel, records, log = quantize_model(model, _load_calib(a.calib), a.method, cfg, in_place=True)
    info = {"method": a.method, "final_block": None, "blocks": log, "wall_s": time.perf_counter() - t0,
            "config": json.loads(a.config)}
    save_quantized(qmodel, tok, records, a.out, cfg.bits, cfg.group_size, info)
    print(f"quantize {a.method}: block output MSE {[round(e['block_out_mse'], 5) for e in log]}", file=sys.stderr)


def _final(a):
    from methods.core.models import load_model

    from .ptq import QuantConfig, final_block
    from .store import load_records, save_quantized

    cli.set_threads(a.threads)
    cfg = from_json(QuantConfig, a.config, "quant")
    # fp32, as in the quantize step: the final block's clipping is learned (LWC)
    model, tok = load_model(a.base, training=True)
    base_q, _ = load_model(a.quantized, training=True)
    records, bits, group = load_records(a.quantized)
    if (bits, group) != (cfg.bits, cfg.group_size):
        raise InputError(f"{a.quantized} is w{bits}g{group}, the config asks for w{cfg.bits}g{cfg.group_size}")
    t0 = time.perf_counter()
    qmodel, last, log = final_block(model, base_q, _load_calib(a.calib), a.objective, cfg, in_place=True)
    base_info = read_json(Path(a.quantized) / "quant.json")
    info = {"method": base_info["method"], "final_block": log, "blocks": base_info["blocks"],
            "wall_s": time.perf_counter() - t0, "config": json.loads(a.config)}
    save_quantized(qmodel, tok, {**records, **last}, a.out, bits, group, info)
    print(f"final {a.objective}: {log}", file=sys.stderr)


def _evaluate(a):
    from .config import EvalConfig
    from .evaluate import evaluate_models

    cli.set_threads(a.threads)
    cfg = from_json(EvalConfig, a.config, "eval")
    t0 = time.perf_counter()
    rows = evaluate_models(cfg, a.fp, a.models, a.data, a.tasks)
    write_metrics(a.out, {"setting": a.setting, "rows": rows}, json.loads(a.config), None, time.perf_counter() - t0)


def _export_tasks(a):
    from methods.core.tokenizer import load_tokenizer

    from .config import EvalConfig
    from .evaluate import export_tasks

    cfg = from_json(EvalConfig, a.config, "eval")
    export_tasks(cfg, load_tokenizer(a.base), a.data, a.out)


def _report(a):
    from .analysis import report
    from .config import AnalysisConfig

    cfg = from_json(AnalysisConfig, a.config, "analysis")
    report(cfg, [read_json(p) for p in a.evals], a.table, a.summary, a.figure, json.loads(a.config))


def build_parser():
    p, sub = cli.subcommands("lfq", __doc__.splitlines()[0])

    step = functools.partial(cli.config_step, sub)

    s = step("data", _data, "generate the PCFG + running-sum corpus, eval prompts, tokenizer", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("train", _train, "train (or, at paper scale, fetch) the FP base model", "data", "out", threads=True)
    step("calibrate", _calibrate, "draw the calibration token windows", "data", "base", "out")
    s = step("quantize", _quantize, "block-wise PTQ baseline of every block", "base", "calib", "out", threads=True)
    s.add_argument("--method", required=True, choices=["rtn", "gptq", "omni"])
    s = step("final", _final, "re-quantize the final block of a baseline (LFQ / ablations)",
             "base", "quantized", "calib", "out", threads=True)
    s.add_argument("--objective", required=True, choices=["mse", "headmse", "lfq"])
    s = step("evaluate", _evaluate, "PPL, KL to FP, top-1 agreement, EM by length, lm-eval",
             "fp", "data", "out", "setting", threads=True)
    s.add_argument("--models", nargs="+", required=True)
    s.add_argument("--tasks", help="the lm-eval task folder of export-tasks (default: exported to a temporary one)")
    step("export-tasks", _export_tasks, "write the lm-eval task folder (task YAMLs next to their data)",
         "data", "base", "out")
    s = step("report", _report, "table, claim metrics, figure", "table", "summary", "figure")
    s.add_argument("--evals", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
