"""CLI of the shared model pool: one sub-command per DAG step.

    python -m methods.core.model_pool <step> --config '<json>' [files...]

`--config` is the top-level `model_pool` section of `config/scales/<scale>.yaml`.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from methods.core import cli


def _data(a):
    from .pool import build_data, pool_config

    print(f"data: {build_data(pool_config(json.loads(a.config)), a.out)}", file=sys.stderr)


def _train(a):
    from .pool import pool_config, train_member

    cli.set_threads(a.threads)
    cfg = pool_config(json.loads(a.config))
    info = train_member(cfg, a.member, a.data, a.out)
    print(f"train {a.member}: params {info.get('n_params')}", file=sys.stderr)


def _verifier(a):
    from .pool import pool_config, train_verifier

    cli.set_threads(a.threads)
    members = {Path(p).name: p for p in (a.members or [])}
    info = train_verifier(pool_config(json.loads(a.config)), a.data, a.out, members)
    print(f"verifier: params {info.get('n_params')}, val AUROC {info.get('val_auroc')}, "
          f"on sampled {info.get('val_auroc_sampled')}", file=sys.stderr)


def _costs(a):
    from methods.core.results import write_metrics

    from .pool import measure_costs, pool_config

    cli.set_threads(a.threads)
    cfg = pool_config(json.loads(a.config))
    dirs = {Path(p).name: p for p in a.members}
    dirs["verifier"] = a.verifier
    write_metrics(a.out, measure_costs(cfg, dirs), json.loads(a.config))


def build_parser():
    p, sub = cli.subcommands("model_pool", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "generate the task mixture and the char tokenizer", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    s = step("train", _train, "train one pool member", "data", "out", "member", threads=True)
    s = step("verifier", _verifier, "train the process verifier", "data", "out", threads=True)
    s.add_argument("--members", nargs="*", default=[], help="member dirs whose samples join the training set")
    s = step("costs", _costs, "FLOPs/token (analytic + FlopCounterMode) and wall time/token", "verifier", "out",
             threads=True)
    s.add_argument("--members", nargs="+", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
