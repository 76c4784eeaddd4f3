"""Each paper's paper-scale DAG, end to end on CPU, on local stand-ins of its hub models and
datasets (tests/paper_path/standins.py): the same rules, steps and code paths as a GPU cluster
run, with the numbers of overlay.yaml. The first GPU run should fail on science, not plumbing.

Papers whose paper path is not implemented yet are listed as expected failures (not run)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.workflow.conftest import ROOT, snakemake_env

from .standins import build, core_overlays, overlay_papers

pytestmark = pytest.mark.paper_path

READY = overlay_papers()
NOT_YET = {  # paper → what is missing on its paper path (it has no stand-in overlay yet)
}


def test_every_paper_is_ready_or_listed():
    from methods.core import registry

    assert sorted(READY + list(NOT_YET)) == registry.papers(ROOT)
    assert not set(READY) & set(NOT_YET)


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """An OpenAI-compatible server (ours) on 127.0.0.1 serving the Qwen2 stand-in, where the
    paper config names a fixed endpoint (hosted APIs; a `serve:` spec is served by the DAG itself)."""
    out = tmp_path_factory.mktemp("standin_models")
    build(out)  # models only are needed here; build is idempotent
    proc = subprocess.Popen([sys.executable, "-m", "methods.core.llm_server", "--model", str(out / "models" / "qwen2"),
                             "--port", "0"], cwd=ROOT, env=snakemake_env(), stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
    assert m, line
    yield m.group(1)
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def standins(tmp_path_factory, llm_server):
    out = tmp_path_factory.mktemp("standins")
    return out, build(out, base_url=llm_server)


def run_papers(papers: list[str], out: Path, scales: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The paper-scale DAGs of `papers` in one Snakemake invocation (`--keep-going`: a paper that
    fails does not stop the others), as a cluster run of several papers would schedule them."""
    env = {**snakemake_env(), "ICML26_LM_EVAL_TASKS": str(out / "lm_eval_tasks")}
    targets = [str(out / "results" / "paper" / p / "claims.json") for p in papers]
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--keep-going", "--config", "scale=paper",
           f"scales_dir={scales}", f"results_dir={out / 'results'}", f"papers=[{','.join(papers)}]", "--", *targets]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    return proc, time.perf_counter() - t0


@pytest.fixture(scope="session")
def paper_runs(standins):
    """Every ready paper's paper path, run once for the session."""
    out, scales = standins
    proc, wall = run_papers(READY, out, scales)
    print(f"paper paths of {len(READY)} papers on stand-ins: {wall:.0f}s wall, exit {proc.returncode}")
    return out, proc


def _failed_logs(out: Path, paper: str) -> str:
    tails = []
    for log in sorted((out / "results" / "paper" / paper / "logs").rglob("*.log")):
        text = log.read_text(errors="replace").strip().splitlines()
        if text and ("error" in text[-1].lower() or "Traceback" in "\n".join(text)):
            tails.append(f"{log.name}: {text[-1]}")
    return "\n".join(tails[-5:])


def _job_seconds(out: Path, paper: str) -> float:
    """Summed wall time of the paper's jobs (Snakemake's benchmark files, read as the report does)."""
    from methods.core.report import read_benchmarks

    return float(read_benchmarks(out / "results" / "paper" / paper)["s"].sum())


@pytest.mark.parametrize("paper", READY + [
    pytest.param(p, marks=pytest.mark.xfail(run=False, reason=why, strict=True)) for p, why in NOT_YET.items()])
def test_paper_path_on_standins(paper, paper_runs):
    out, proc = paper_runs
    target = out / "results" / "paper" / paper / "claims.json"
    assert target.is_file(), (f"{paper} paper path failed (Snakemake exit {proc.returncode}):\n"
                              f"{_failed_logs(out, paper)}\n{proc.stderr[-3000:]}")
    claims = json.loads(target.read_text())
    assert claims["scale"] == "paper" and claims["claims"]
    assert all(c["verdict"] for c in claims["claims"])
    print(f"{paper}: paper path on stand-ins, {_job_seconds(out, paper):.0f}s of jobs, {len(claims['claims'])} claims")


def test_overlay_maps_every_hub_id_of_the_ready_papers(standins):
    """No hub id survives in the stand-in config of a paper whose paper path runs here: every
    one is mapped to a local directory (otherwise the run would reach for the network)."""
    import yaml

    out, scales = standins
    paper = yaml.safe_load((scales / "paper.yaml").read_text())
    hub_like = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    for name in READY + core_overlays():
        left = []

        def walk(node, path):
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, f"{path}.{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{path}[{i}]")
            elif isinstance(node, str) and hub_like.match(node) and not os.path.exists(node):
                left.append(f"{path}={node}")

        walk(paper[name], name)
        assert not left, f"unmapped hub ids: {left}"
