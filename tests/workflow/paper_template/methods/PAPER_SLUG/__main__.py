"""CLI of PAPER_SLUG: one sub-command per DAG step.

    python -m methods.PAPER_SLUG estimate --config '<json>' --summary S --figure F

`--config` is the paper's section of `config/scales/<scale>.yaml`."""
from __future__ import annotations

import dataclasses
import functools
import sys
import time

from methods.core import cli
from methods.core.config import from_json


def _estimate(a):
    from methods.core import plots
    from methods.core.results import write_metrics

    from .config import Config
    from .estimate import draws, estimate

    t0 = time.perf_counter()
    cfg = from_json(Config, a.config, "PAPER_SLUG")
    m = estimate(cfg)
    fig, ax = plots.figure()
    ax.hist(draws(cfg), bins=cfg.bins, range=(0, 1), density=True, label="Monte Carlo")
    x = [i / 200 for i in range(201)]
    ax.plot(x, [cfg.k * t ** (cfg.k - 1) for t in x], label=f"density k x^(k-1), k = {cfg.k}")
    ax.set_xlabel("max of k uniforms")
    ax.legend()
    plots.save(fig, a.figure, f"Max of {cfg.k} uniforms, {cfg.n} draws: mean {m['mean_max']:.4f} "
               f"vs k/(k+1) = {m['exact_mean']:.4f}.")
    write_metrics(a.summary, m, dataclasses.asdict(cfg), cfg.seed, time.perf_counter() - t0)
    print(f"estimate: mean {m['mean_max']:.4f}, z {m['z']:.2f}", file=sys.stderr)


def build_parser():
    p, sub = cli.subcommands("PAPER_SLUG", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    step("estimate", _estimate, "Monte Carlo E[max of k uniforms], summary and figure", "summary", "figure")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
