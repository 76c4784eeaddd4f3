"""CLI of SCOPE: one sub-command per DAG step.

    python -m methods.scope <step> --config '<json>' [files...]

`--config` is the step's section of `config/scales/<scale>.yaml` (`scope.outcomes`,
`scope.predictor`, `{route, k_prompt}`).
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, write_metrics


def _outcomes(a):
    from .config import OutcomeConfig
    from .run import build_outcomes

    cli.set_threads(a.threads)
    cfg = from_json(OutcomeConfig, a.config, "outcomes")
    accs = build_outcomes(cfg, {Path(p).name: p for p in a.members}, a.out)
    print(f"outcomes: accuracy per model {accs}", file=sys.stderr)


def _sft(a):
    from .config import PredictorConfig
    from .run import train_sft

    cli.set_threads(a.threads)
    info = train_sft(from_json(PredictorConfig, a.config, "predictor"), a.outcomes, a.variant, a.out)
    if info.get("hub"):
        print(f"sft {a.variant}: the hub predictor {info['hub']} (k = {info['k']}), not trained", file=sys.stderr)
    else:
        print(f"sft {a.variant}: params {info['n_params']}, examples {info['n_examples']}", file=sys.stderr)


def _grpo(a):
    from .config import PredictorConfig
    from .run import train_grpo

    cli.set_threads(a.threads)
    info = train_grpo(from_json(PredictorConfig, a.config, "predictor"), a.outcomes, a.sft, a.out)
    if info.get("hub"):
        print(f"grpo: the hub predictor {info['hub']} (already SFT + GRPO), not trained", file=sys.stderr)
    else:
        print(f"grpo: reward {info['log'][0]['reward']:.3f} -> {info['log'][-1]['reward']:.3f}", file=sys.stderr)


def _route(a):
    from .analysis import analyze
    from .config import RouteConfig

    cli.set_threads(a.threads)
    d = json.loads(a.config)
    if set(d) != {"route", "k_prompt"}:
        raise InputError(f"config: route step expects keys route and k_prompt, got {sorted(d)}")
    cfg = from_json(RouteConfig, json.dumps(d["route"]), "route")
    t0 = time.perf_counter()
    m = analyze(cfg, a.outcomes, {"rl": a.rl, "sft": a.sft, "noanchor": a.noanchor}, d["k_prompt"],
                a.out_dir, a.summary, a.figure)
    write_metrics(a.summary, m, d, cfg.seed, time.perf_counter() - t0)
    print(f"route: {json.dumps({k: v for k, v in m.items() if k.startswith('c')}, default=str)}", file=sys.stderr)


def build_parser():
    p, sub = cli.subcommands("scope", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("outcomes", _outcomes, "queries, the pool's greedy outcome table, anchor retrieval", "out", threads=True)
    s.add_argument("--members", nargs="+", required=True)
    s = step("sft", _sft, "SFT of the outcome predictor", "outcomes", "variant", "out", threads=True)
    step("grpo", _grpo, "GRPO stage of the predictor", "outcomes", "sft", "out", threads=True)
    step("route", _route, "predictions, routing, baselines, metrics and figure", "outcomes", "rl", "sft",
         "noanchor", "out_dir", "summary", "figure", threads=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
