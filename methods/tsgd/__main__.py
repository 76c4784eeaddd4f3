"""CLI of the TSGD study (experience-library optimisation with textual SGD): one sub-command
per DAG step.

    python -m methods.tsgd <step> --config '<json>' [files...]

`--config` is the paper's section of `config/scales/<scale>.yaml`, as JSON.
"""
from __future__ import annotations

import csv
import functools
import json
import sys

from methods.core import cli
from methods.core.results import InputError, read_json, write_metrics, write_text


def _data(a):
    from .run import build_data

    print(f"data: {build_data(a.config, a.out)}", file=sys.stderr)


def _baselines(a):
    from .run import baselines

    r = baselines(a.config, a.data, a.out, a.curve)
    print(f"baselines: zero-shot {r['zero_shot_test_acc']:.3f} rag {r['rag_curve']}", file=sys.stderr)


def _train(a):
    from .run import train_variant

    r = train_variant(a.config, a.variant, a.data, a.out, a.trace)
    print(f"train {a.variant}: test {r['test_acc']:.3f} |L| {len(r['library']['rules'])} "
          f"max {r['max_size']} calls {r['n_solver_calls']}", file=sys.stderr)


def _lm_eval(a):
    from .anchor import run_anchor

    r = run_anchor(a.config, a.library, a.out)
    print(f"lm-eval anchor: gain over zero-shot {r['gain_over_zero_shot']:+.3f}", file=sys.stderr)


def _aggregate(a):
    from .analysis import claim_metrics, figure, nan_to_none
    from .run import study

    s = study(a.config)
    base = read_json(a.baselines)
    runs, traces = {}, {}
    for p, t in zip(a.runs, a.traces):
        r = read_json(p)
        runs[r["variant"]] = r
        with open(t) as f:
            traces[r["variant"]] = list(csv.DictReader(f))
    if "full" not in runs:
        raise InputError("aggregate: the 'full' variant is required (tsgd.variants.full)")
    m = claim_metrics(base, runs, traces, s.data.n_types, s.analysis.flat_from, s.llm.kind == "sim")
    if a.lm_eval:  # paper scale: the lm-eval anchor, reported beside the claims (no claim reads it)
        m["lm_eval"] = read_json(a.lm_eval)
    rows = [{"method": "zero_shot", "test_acc": base["zero_shot_test_acc"], "library_size": 0}]
    rows += [{"method": f"static_rag_{c['memory_size']}", "test_acc": c["test_acc"],
              "library_size": c["memory_size"]} for c in base["rag_curve"]]
    rows += [{"method": f"tsgd_{v}", "test_acc": r["test_acc"], "library_size": len(r["library"]["rules"])}
             for v, r in runs.items()]
    write_text(a.table, "method,test_acc,library_size\n" + "".join(
        f"{r['method']},{r['test_acc']:.4f},{r['library_size']}\n" for r in rows))
    write_metrics(a.summary, nan_to_none(m), json.loads(a.config))
    figure(runs, traces, base, a.figure)


def build_parser():
    p, sub = cli.subcommands("tsgd", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "MATH-lite (tiny) or MATH/AIME from the hub (paper): train/val/test", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("baselines", _baselines, "zero-shot and append-only static RAG vs memory size",
         "data", "out", "curve")
    s = step("train", _train, "one TSGD variant: library, trace, test accuracy", "data", "out", "trace")
    s.add_argument("--variant", required=True)
    s = step("lm_eval", _lm_eval, "paper scale: lm-eval on the served solver, zero-shot and with a library",
             "library", "out")
    s = step("aggregate", _aggregate, "test table, claim metrics and the figure",
             "baselines", "table", "summary", "figure")
    s.add_argument("--runs", nargs="+", required=True)
    s.add_argument("--traces", nargs="+", required=True)
    s.add_argument("--lm_eval", default=None, help="paper scale: the lm_eval step's output")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
