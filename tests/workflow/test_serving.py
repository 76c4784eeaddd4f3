"""Served models as part of the DAG (workflow/rules/serving.smk): the paper-scale DAGs of pse,
verbalized_sampling and memora on the stand-ins (tests/paper_path), with `engine: local` in their overlays,
start their own servers (one per open model: our llm_server on 127.0.0.1 in place of `vllm
serve`), their steps talk to them through the published address files, and every server is gone
when the run ends: after success, and after a consumer that fails (the rest of its job group is
killed, the server with it). Hosted APIs (`base_url: https://...`) keep pointing at one local
server of the test, as in tests/paper_path."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.core.test_serving import alive
from tests.paper_path.standins import build
from tests.workflow.conftest import ROOT, snakemake_env

pytestmark = pytest.mark.paper_path

# a server's group runs its consumers at once and sums their threads; the clients take 0
# (helpers/serving.smk client_threads), so two cores place any group (pse's primary agent has five
# consumers, memora's retrieve stage six) beside one more job
CORES = {"pse": 2, "verbalized_sampling": 2, "memora": 2}


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    out = tmp_path_factory.mktemp("serving_standins")
    build(out)  # the models first, for the hosted-API stand-in server
    proc = subprocess.Popen([sys.executable, "-m", "methods.core.llm_server", "--model", str(out / "models" / "qwen2"),
                             "--port", "0"], cwd=ROOT, env=snakemake_env(), stderr=subprocess.PIPE, text=True)
    m = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", proc.stderr.readline())
    assert m
    yield out, build(out, base_url=m.group(1))
    proc.terminate()
    proc.wait(timeout=10)


def run(paper: str, scales: Path, results: Path) -> subprocess.CompletedProcess:
    target = results / "paper" / paper / "claims.json"
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(CORES[paper]), "--config", "scale=paper",
           f"scales_dir={scales}", f"results_dir={results}", f"papers=[{paper}]", "--", str(target)]
    return subprocess.run(cmd, cwd=ROOT, env=snakemake_env(), capture_output=True, text=True, timeout=1200)


def servers(results: Path, paper: str) -> dict[str, tuple[int, int, str]]:
    """{served model: (server pid, serving process pid, its log)} from the serving jobs' logs."""
    out = {}
    for log in sorted((results / "paper" / "serving" / paper / "logs").glob("*.log")):
        text = log.read_text()
        m = re.search(r"server pid (\d+) .*serving process pid (\d+)", text)
        assert m, text
        out[log.stem] = (int(m.group(1)), int(m.group(2)), text)
    return out


def run_processes(results: Path) -> list[str]:
    """Command lines of live processes that name this run's results directory."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and alive(int(d.name)):
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(results) in cmd and "pytest" not in cmd:
                out.append(f"{d.name}: {cmd[:200]}")
    return out


def gone(pid: int, within_s: float = 20) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


@pytest.mark.parametrize("paper, served", [
    ("pse", {"llama-3.1-8b", "judge-qwen2.5-72b"}),
    ("verbalized_sampling", {"base", "aligned"}),
    ("memora", {"curator@build", "curator@retrieve"}),   # one server per stage: chained steps never share one
])
def test_dag_serves_its_models_and_stops_them(standins, tmp_path, paper, served):
    out, scales = standins
    results = tmp_path / "r"
    proc = run(paper, scales, results)
    assert proc.returncode == 0, proc.stderr[-4000:]
    claims = json.loads((results / "paper" / paper / "claims.json").read_text())
    assert claims["claims"] and all(c["verdict"] for c in claims["claims"])
    srv = servers(results, paper)
    assert set(srv) == served
    for name, (server, wrapper, log) in srv.items():
        assert "ready at http://127.0.0.1:" in log and "stopping (SIGTERM)" in log and "stopped" in log, log
        assert gone(server) and gone(wrapper), name
    assert not list((results / "paper" / "serving" / paper).glob("*.address.json"))  # no stale address
    paper_cfg = yaml.safe_load((scales / "paper.yaml").read_text())[paper]
    if paper == "pse":
        prov = json.loads((results / "paper" / "pse" / "summary.json").read_text())["provenance"]["llm"]
        agent = prov["agents"]["llama-3.1-8b"]
        assert agent["served"]["name"] == "llama-3.1-8b" and agent["served"]["engine"] == "local"
        assert agent["model"] == paper_cfg["serving"]["llama-3.1-8b"]["model"]
        assert agent["sampling"]["temperature"] == 0.0
        assert prov["judges"][1]["served"]["name"] == "judge-qwen2.5-72b"
        assert "served" not in prov["agents"]["gpt-4.1"]  # a hosted API: its base_url as given
    elif paper == "memora":
        info = json.loads((results / "paper" / "memora" / "stores" / "memora.json").read_text())["info"]
        assert info["llm"]["served"]["name"] == "curator@build" and info["llm_calls"] > 0
        assert info["llm"]["model"] == paper_cfg["serving"]["curator"]["model"]
        prov = json.loads((results / "paper" / "memora" / "summary.json").read_text())["provenance"]["llm"]
        assert prov["curator"]["memora"] == info["llm"]
    else:
        for m in ("base", "aligned"):
            prov = json.loads((results / "paper" / paper / "samples" / f"{m}.json").read_text())["provenance"]["llm"]
            assert prov["served"]["name"] == m and prov["model"] == paper_cfg["serving"][m]["model"]
            s = paper_cfg["sample"]
            assert prov["sampling"] == {k: s[k] for k in ("temperature", "top_p", "max_new_tokens", "n", "seed")}
    assert "API_KEY=" not in (results / "paper" / paper / "claims.json").read_text()


def test_failed_consumer_takes_its_server_down(standins, tmp_path):
    """The primary agent's runs time out on every request (timeout 1 ms, no retry): the step fails,
    Snakemake kills its job group, and the served model goes with it; no output is left complete."""
    out, scales = standins
    bad = tmp_path / "scales"
    bad.mkdir()
    for f in scales.glob("*.yaml"):
        (bad / f.name).write_text(f.read_text())
    cfg = yaml.safe_load((bad / "paper.yaml").read_text())
    (primary,) = [a for a in cfg["pse"]["agents"] if a["name"] == cfg["pse"]["primary"]]
    primary["spec"].update(timeout=0.001, max_retries=0)
    (bad / "paper.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    results = tmp_path / "r"
    proc = run("pse", bad, results)
    assert proc.returncode != 0
    srv = servers(results, "pse")
    server, wrapper, log = srv["llama-3.1-8b"]
    assert "ready at" in log, log
    assert gone(server) and gone(wrapper)
    # nor is any other step of the run left behind (a consumer waiting for a server that is gone)
    left = time.monotonic() + 30
    while (procs := run_processes(results)) and time.monotonic() < left:
        time.sleep(0.2)
    assert not procs, procs
    assert not (results / "paper" / "pse" / "transcripts" / "runs" / "llama-3.1-8b.jsonl").exists()
    assert not (results / "paper" / "pse" / "summary.json").exists()
    failed = [p for p in (results / "paper" / "pse" / "logs").rglob("*.log") if "LLM endpoint" in p.read_text()]
    assert failed, "the consumer did not fail on its endpoint"
    line = [l for l in failed[0].read_text().splitlines() if "error:" in l]
    assert len(line) == 1 and "timeout" in line[0], failed[0].read_text()[-2000:]
