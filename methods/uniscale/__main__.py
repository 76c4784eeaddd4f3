"""CLI of UniScale: one sub-command per DAG step.

    python -m methods.uniscale <step> --config '<json>' [files...]

`--config` is the step's section of `uniscale` in `config/scales/<scale>.yaml`.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, read_json, write_json, write_metrics


def _table(a):
    from .table import TableConfig, build_table

    cli.set_threads(a.threads)
    cfg = from_json(TableConfig, a.config, "uniscale.table")
    members = {Path(p).name: p for p in a.members}
    costs = read_json(a.costs)
    df = build_table(cfg, members, a.verifier, a.data, costs)
    from methods.core.results import atomic_path

    with atomic_path(a.out) as tmp:
        df.to_parquet(tmp, index=False)
    print(df.groupby("arm")[["correct", "verifier", "tokens"]].mean().to_string(), file=sys.stderr)


def _queries(a):
    from methods.core.results import atomic_path, write_jsonl

    from .config import QueriesConfig
    from .queries import load_queries

    cfg = from_json(QueriesConfig, a.config, "uniscale.queries")
    qs = load_queries(cfg)
    with atomic_path(a.out, is_dir=True) as tmp:
        write_jsonl(tmp / "test.jsonl", qs)
        # the bandit's context PCA is fitted on train.jsonl: here the stream's own prompts (no labels)
        write_jsonl(tmp / "train.jsonl", [{"prompt": q["prompt"], "kind": q["kind"]} for q in qs])
    print(f"queries: {len(qs)} ({', '.join(s.name for s in cfg.sets)})", file=sys.stderr)


def _analyze(a):
    from methods.core.results import read_jsonl
    from methods.core.safeload import load_parquet

    from .analysis import figures, frontier_areas, metrics, run_all
    from .bandit import BanditConfig

    cfg = from_json(BanditConfig, a.config, "uniscale.bandit")
    t0 = time.perf_counter()
    df = load_parquet(a.table, columns=("model",))
    for need in ("uis_linucb", "route_linucb", "tts_linucb", "random"):
        if need not in cfg.policies:
            raise InputError(f"config key 'uniscale.bandit.policies': must include {need}")
    if cfg.tts_model not in set(df["model"]):
        raise InputError(f"config key 'uniscale.bandit.tts_model': {cfg.tts_model!r} is not a pool member")
    rows = read_jsonl(Path(a.data) / "train.jsonl")
    # the pool's generated train set: every 10th prompt; a benchmark stream (`queries` step): all its prompts
    train = [r["prompt"] for r in (rows if rows and rows[0].get("kind") == "math" else rows[::10])]
    res = run_all(df, train, cfg)
    areas = frontier_areas(df, cfg)
    m, curves = metrics(res, areas, cfg)
    m["pool_costs"] = read_json(a.costs)["members"]
    from methods.core.model_pool.pool import auroc

    # how well the verifier's final score separates right from wrong final answers in the table
    m["verifier_auroc_final_answer"] = {"all": auroc(df.verifier.tolist(), df.correct.astype(bool).tolist()),
                                        **{k: auroc(g.verifier.tolist(), g.correct.astype(bool).tolist())
                                           for k, g in df.groupby("model")}}
    acc = df.groupby(["model", "tts"]).correct.mean()
    v = m["verifier_auroc_final_answer"]["all"]
    extra = ("; verifier AUROC of final answers in the table " + ("n/a" if v is None else f"{v:.2f}")
             + "; accuracy greedy vs best sampled arm per member: "
             + ", ".join(f"{k} {acc[k].get('greedy', float('nan')):.3f} vs "
                         f"{acc[k].drop('greedy', errors='ignore').max():.3f}" for k in sorted(set(df.model))))
    for k in ("c1_uis_minus_best_restricted", "c1_uis_minus_random"):
        m["notes"][k] += extra
    m["eflops_vs_measured_flops_spearman"] = float(df[["eflops", "flops_measured"]].corr("spearman").iloc[0, 1])
    write_json(a.runs, res)
    write_metrics(a.summary, m, json.loads(a.config), None, time.perf_counter() - t0)
    figures(res, areas, curves, cfg, a.fig_regret, a.fig_pareto)


def build_parser():
    p, sub = cli.subcommands("uniscale", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("table", _table, "offline replay table: every (query, model, TTS) run", "data", "verifier", "costs",
             "out", threads=True)
    s.add_argument("--members", nargs="+", required=True)
    s = step("queries", _queries, "benchmark queries (MATH-500 / AIME / AMC) from the hub", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("analyze", _analyze, "bandit runs, claim metrics and figures", "table", "data", "costs", "runs",
         "summary", "fig_regret", "fig_pareto")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
