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


def _member(a):
    from .run import train_direct_member

    cli.set_threads(a.threads)
    info = train_direct_member(json.loads(a.config), a.member, a.data, a.out)
    print(f"member {a.member} (direct answers): params {info['n_params']}", file=sys.stderr)


def _predictor(a):
    """The predictor config of replicate `--seed`."""
    from .config import PredictorConfig, for_seed

    return for_seed(from_json(PredictorConfig, a.config, "predictor"), int(a.seed))


def _sft(a):
    from .run import train_sft

    cli.set_threads(a.threads)
    info = train_sft(_predictor(a), a.outcomes, a.variant, a.out)
    if info.get("hub"):
        print(f"sft {a.variant}: the hub predictor {info['hub']} (k = {info['k']}), not trained", file=sys.stderr)
    else:
        print(f"sft {a.variant}: params {info['n_params']}, examples {info['n_examples']}", file=sys.stderr)


def _grpo(a):
    from .run import train_grpo

    cli.set_threads(a.threads)
    info = train_grpo(_predictor(a), a.outcomes, a.sft, a.out)
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
    if not len(a.seeds) == len(a.rl) == len(a.sft) == len(a.noanchor):
        raise InputError(f"route: {len(a.seeds)} seeds need as many --rl, --sft and --noanchor directories "
                         f"(got {len(a.rl)}, {len(a.sft)}, {len(a.noanchor)})")
    dirs = {int(s): {"rl": r, "sft": f, "noanchor": n} for s, r, f, n in zip(a.seeds, a.rl, a.sft, a.noanchor)}
    m = analyze(cfg, a.outcomes, dirs, d["k_prompt"], a.out_dir, a.summary, a.figure)
    write_metrics(a.summary, m, d, cfg.seed, time.perf_counter() - t0)
    print(f"route: {json.dumps({k: v for k, v in m.items() if k.startswith('c')}, default=str)}", file=sys.stderr)


def build_parser():
    p, sub = cli.subcommands("scope", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("outcomes", _outcomes, "queries, the pool's greedy outcome table, anchor retrieval", "out", threads=True)
    s.add_argument("--members", nargs="+", required=True)
    step("member", _member, "a direct-answer pool member (the model_pool section with it as a member)",
         "member", "data", "out", threads=True)
    step("sft", _sft, "SFT of the outcome predictor", "outcomes", "variant", "seed", "out", threads=True)
    step("grpo", _grpo, "GRPO stage of the predictor", "outcomes", "sft", "seed", "out", threads=True)
    s = step("route", _route, "predictions, routing, baselines, metrics and figure (every seed)", "outcomes",
             "out_dir", "summary", "figure", threads=True)
    for f in ("seeds", "rl", "sft", "noanchor"):
        s.add_argument(f"--{f}", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
