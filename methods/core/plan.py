"""The GPU-hour plan of a dry run: the jobs' own Snakemake resources (gpu, nodes, runtime, as
methods/core/resources.py sized them), summed per rule and per paper.

The Snakefile calls `print_after_dry_run` at exit of the main process (`snakemake -n`, never
inside a cluster job); `make plan SCALE=paper` prints only this table
(`snakemake -n --quiet all`). No torch.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from . import resources as R


def job_rows(jobs) -> list[dict]:
    """One row per job: paper (the .smk file its rule is defined in; the claims rule's `paper`
    wildcard), rule, GPUs, nodes and runtime (minutes) from the job's resources."""
    rows = []
    for job in jobs:
        res = job.resources
        paper = Path(str(job.rule.snakefile)).stem
        if paper == "report":
            paper = job.wildcards.get("paper", "report") if hasattr(job.wildcards, "get") else "report"
        elif paper == "serving":  # a served model (workflow/rules/serving.smk) counts to the paper using it
            paper = job.wildcards.get("serve_paper", "serving") if hasattr(job.wildcards, "get") else "serving"
        rows.append({"paper": paper, "rule": job.rule.name, "gpus": int(res.get("gpu", 0) or 0),
                     "nodes": int(res.get("nodes", 1) or 1), "runtime": int(res.get("runtime", 0) or 0)})
    return rows


def table(rows: list[dict], papers: list[str], scale: str = "") -> str:
    """Per rule (jobs, GPUs/job, nodes/job, hours/job, GPU-hours), per paper (one row for each
    enabled paper, then one for each shared part of methods/core with GPU jobs of its own, e.g.
    model_pool) and the total. GPU-hours = GPUs x runtime of each job."""
    gpu_rows = [r for r in rows if r["gpus"] > 0]
    w = max([22] + [len(r["rule"]) for r in gpu_rows])  # rule names are `<paper slug>_<step>`
    groups = defaultdict(list)
    for r in gpu_rows:
        groups[(r["paper"], r["rule"], r["gpus"], r["nodes"])].append(r)
    head = (f"GPU-hour plan{f' (scale {scale})' if scale else ''}: {len(gpu_rows)} GPU jobs of {len(rows)}; "
            f"{R.GPU}, {R.PEAK_FLOPS / 1e12:g} TFLOP/s bf16, MFU train {R.MFU['train']:.2f} / prefill "
            f"{R.MFU['prefill']:.2f} / decode {R.MFU['decode']:.2f}, x{R.SAFETY:g} (methods/core/resources.py)")
    lines = [head, f"{'paper':<20} {'rule':<{w}} {'jobs':>5} {'GPUs/job':>9} {'nodes':>6} {'hours/job':>10} "
                   f"{'GPU-hours':>10}"]
    order = {p: i for i, p in enumerate(papers)}
    for (paper, rule, gpus, nodes), rs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        minutes = sum(r["runtime"] for r in rs)
        lines.append(f"{paper:<20} {rule:<{w}} {len(rs):>5} {gpus:>9} {nodes:>6} {minutes / 60 / len(rs):>10.1f} "
                     f"{gpus * minutes / 60:>10.1f}")
    lines += ["GPU-hours per paper", f"{'paper':<20} {'GPU jobs':>9} {'GPU-hours':>10}"]
    per = {p: [0, 0.0] for p in papers}
    for r in gpu_rows:
        acc = per.setdefault(r["paper"], [0, 0.0])
        acc[0] += 1
        acc[1] += r["gpus"] * r["runtime"] / 60
    for paper, (n, h) in per.items():
        lines.append(f"{paper:<20} {n:>9} {h:>10.1f}")
    lines.append(f"{'total':<20} {len(gpu_rows):>9} {sum(h for _, h in per.values()):>10.1f}")
    return "\n".join(lines)


def print_after_dry_run(workflow, papers: list[str], scale: str, out=None) -> None:
    """At exit of a dry run in the main process: the plan of the jobs it would run, when any
    of them asks for a GPU. Anything else (a failed run, a lint) prints nothing."""
    try:
        if not (workflow.is_main_process and workflow.dryrun):
            return
        rows = job_rows(workflow.dag.needrun_jobs(exclude_finished=False))
    except Exception:  # the DAG was never built (an error before it): no plan
        return
    if any(r["gpus"] for r in rows):
        print(table(rows, papers, scale), file=out or sys.stdout, flush=True)
