"""No credential reaches Snakemake's records: an LLM spec (methods/core/llm_spec.py LLMSpec) refuses
a key written into it when the workflow loads, before any job, in one line that does not repeat
it; a spec that names the key's environment variable (`api_key_env`) runs, and the key's value
appears nowhere under .snakemake/ or the results."""
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import ROOT, config_error, copy_scales, snakemake_env

SIM_AGENT = "    - {name: sim, spec: {backend: sim,"


def agent_overlay(tmp_path: Path, spec: str) -> Path:
    """A copy of config/scales with the smoke pse panel's agent `sim` given `spec` instead."""
    scales = copy_scales(tmp_path / "scales")
    lines = (scales / "smoke.yaml").read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith(SIM_AGENT)]
    assert len(at) == 1, "the smoke pse panel changed"
    lines[at[0]] = f"    - {{name: sim, spec: {spec}}}\n"
    (scales / "smoke.yaml").write_text("".join(lines))
    return scales


def files_holding(text: str, *dirs: Path) -> list[str]:
    needle = text.encode()
    return [str(f) for d in dirs if d.exists() for f in d.rglob("*")
            if f.is_file() and not f.is_symlink() and needle in f.read_bytes()]


def run(args, cfg, env=None, timeout=600):
    cmd = [sys.executable, "-m", "snakemake", *args, "--config", *(f"{k}={v}" for k, v in cfg.items())]
    return subprocess.run(cmd, cwd=ROOT, env=env or snakemake_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_key_in_an_agent_spec_is_refused_before_any_job(tmp_path):
    secret = f"sk-test-SECRET{uuid.uuid4().hex}"
    scales = agent_overlay(tmp_path, "{backend: openai, base_url: 'http://127.0.0.1:9/v1', model: m, "
                                     f"api_key: {secret}}}")
    out = run(["-n"], {"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"})
    msg = config_error(out)
    assert "smoke.yaml" in msg and "unknown config key 'pse.agents[0].spec.api_key'" in msg, msg
    assert "api_key_env" in msg  # the allowed keys, where a credential belongs
    assert secret not in out.stdout + out.stderr
    assert not (tmp_path / "r").exists()
    assert files_holding(secret, ROOT / ".snakemake") == []


def test_key_pasted_into_api_key_env_is_refused_without_repeating_it(tmp_path):
    secret = f"sk-test-SECRET{uuid.uuid4().hex}"
    scales = agent_overlay(tmp_path, "{backend: openai, base_url: 'http://127.0.0.1:9/v1', model: m, "
                                     f"api_key_env: {secret}}}")
    out = run(["-n"], {"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"})
    msg = config_error(out)
    assert "'pse.agents[0].spec.api_key_env': the value does not match" in msg, msg
    assert secret not in out.stdout + out.stderr
    assert files_holding(secret, ROOT / ".snakemake") == []


@pytest.mark.workflow
def test_key_from_its_variable_leaves_no_trace(tmp_path):
    """The agent's step runs against a closed port (it fails after its first request, which
    carries the key in its Authorization header): neither the dry run nor the run records it."""
    var = "ICML26_TEST_API_KEY"
    secret = f"sk-test-SECRET{uuid.uuid4().hex}"
    scales = agent_overlay(tmp_path, "{backend: openai, base_url: 'http://127.0.0.1:9/v1', model: m, "
                                     f"api_key_env: {var}, max_retries: 0, timeout: 5}}")
    cfg = {"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r", "reports_dir": tmp_path / "p"}
    env = {**snakemake_env(), var: secret}
    target = tmp_path / "r" / "smoke" / "pse" / "transcripts" / "runs" / "sim.jsonl"
    plan = run([str(target), "-n"], cfg, env)
    assert plan.returncode == 0, plan.stderr[-3000:]
    done = run([str(target), "--cores", "1"], cfg, env)
    log = tmp_path / "r" / "smoke" / "pse" / "logs" / "run" / "sim.log"
    assert done.returncode != 0 and log.exists(), done.stderr[-3000:]  # it ran, and failed on the endpoint
    assert (tmp_path / "r" / "smoke" / "pse" / "scenarios.jsonl").exists()
    assert secret not in plan.stdout + plan.stderr + done.stdout + done.stderr
    assert files_holding(secret, ROOT / ".snakemake", tmp_path / "r", tmp_path / "p") == []
    assert os.environ.get(var) is None  # the key lived only in the runs' environment
