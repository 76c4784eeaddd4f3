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
    """Every baseline of `--methods` on one calibration set, one model dir each (`--out`, same
    order). The FP model is loaded once; each baseline but the last quantizes a copy of it, the
    last one the loaded model itself (so the process holds at most two models)."""
    from methods.core.models import load_model

    from .ptq import QuantConfig, quantize_model
    from .store import save_quantized

    if len(a.methods) != len(a.out):
        raise InputError(f"quantize: {len(a.methods)} methods for {len(a.out)} output directories")
    cli.set_threads(a.threads)
    cfg = from_json(QuantConfig, a.config, "quant")
    # fp32 weights for calibration and the learnable clipping (the runtime's training dtype)
    model, tok = load_model(a.base, training=True)
    ids = _load_calib(a.calib)
    for i, (method, out) in enumerate(zip(a.methods, a.out)):
        t0 = time.perf_counter()
        qmodel, records, log = quantize_model(model, ids, method, cfg, in_place=i == len(a.methods) - 1)
        info = {"method": method, "final_block": None, "blocks": log, "wall_s": time.perf_counter() - t0,
                "config": json.loads(a.config)}
        save_quantized(qmodel, tok, records, out, cfg.bits, cfg.group_size, info)
        print(f"quantize {method}: block output MSE {[round(e['block_out_mse'], 5) for e in log]}", file=sys.stderr)
        del qmodel, records


def _final(a):
    """Each final-block objective of `--objectives` on its baseline (`--quantized`, same order; a
    baseline may repeat), one model dir each (`--out`). Each distinct baseline is loaded once; its
    final block is replaced in place and restored after the variant is saved."""
    from methods.core.models import load_model

    from .ptq import QuantConfig, final_block
    from .store import load_records, save_quantized

    if not len(a.objectives) == len(a.quantized) == len(a.out):
        raise InputError(f"final: {len(a.objectives)} objectives, {len(a.quantized)} baselines and "
                         f"{len(a.out)} output directories must match one to one")
    cli.set_threads(a.threads)
    cfg = from_json(QuantConfig, a.config, "quant")
    # fp32, as in the quantize step: the final block's clipping is learned (LWC)
    model, tok = load_model(a.base, training=True)
    ids = _load_calib(a.calib)
    loaded = None
    for objective, quantized, out in zip(a.objectives, a.quantized, a.out):
        if loaded is None or loaded[0] != quantized:
            loaded = None   # free the previous baseline before loading the next
            base_q, _ = load_model(quantized, training=True)
            records, bits, group = load_records(quantized)
            if (bits, group) != (cfg.bits, cfg.group_size):
                raise InputError(f"{quantized} is w{bits}g{group}, the config asks for w{cfg.bits}g{cfg.group_size}")
            loaded = (quantized, base_q, records, read_json(Path(quantized) / "quant.json"))
        _, base_q, records, base_info = loaded
        kept = base_q.model.layers[-1]
        t0 = time.perf_counter()
        qmodel, last, log = final_block(model, base_q, ids, objective, cfg, in_place=True)
        info = {"method": base_info["method"], "final_block": log, "blocks": base_info["blocks"],
                "wall_s": time.perf_counter() - t0, "config": json.loads(a.config)}
        save_quantized(qmodel, tok, {**records, **last}, out, cfg.bits, cfg.group_size, info)
        base_q.model.layers[-1] = kept   # the baseline again, for its next objective
        print(f"final {objective} on {base_info['method']}: {log}", file=sys.stderr)


def _evaluate(a):
    from .config import EvalConfig
    from .evaluate import evaluate_models

    cli.set_threads(a.threads)
    cfg = from_json(EvalConfig, a.config, "eval")
    t0 = time.perf_counter()
    rows = evaluate_models(cfg, a.fp, a.models, a.data, a.tasks)
    write_metrics(a.out, {"setting": a.setting, "seed": a.seed, "rows": rows}, json.loads(a.config), None, time.perf_counter() - t0)


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
    s = step("quantize", _quantize, "block-wise PTQ baselines of every block (one model dir each)", "base", "calib",
             threads=True)
    s.add_argument("--methods", nargs="+", required=True, choices=["rtn", "gptq", "omni"])
    s.add_argument("--out", nargs="+", required=True, help="one output directory per method, same order")
    s = step("final", _final, "re-quantize the final block of baselines (LFQ / ablations; one model dir each)",
             "base", "calib", threads=True)
    s.add_argument("--objectives", nargs="+", required=True, choices=["mse", "headmse", "lfq"])
    s.add_argument("--quantized", nargs="+", required=True, help="the baseline dir of each objective, same order")
    s.add_argument("--out", nargs="+", required=True, help="one output directory per objective, same order")
    s = step("evaluate", _evaluate, "PPL, KL to FP, top-1 agreement, EM by length, lm-eval",
             "fp", "data", "out", "setting", threads=True)
    s.add_argument("--models", nargs="+", required=True)
    s.add_argument("--seed", type=int, required=True, help="the quantization seed of these models (recorded)")
    s.add_argument("--tasks", help="the lm-eval task folder of export-tasks (default: exported to a temporary one)")
    step("export-tasks", _export_tasks, "write the lm-eval task folder (task YAMLs next to their data)",
         "data", "base", "out")
    s = step("report", _report, "table, claim metrics, figure", "table", "summary", "figure")
    s.add_argument("--evals", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
