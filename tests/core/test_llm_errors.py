"""Bad answers from an OpenAI-compatible endpoint, at the level of a DAG step: a step whose LLM
endpoint is unreachable, refuses the key (HTTP 401) or answers a 200 that is not a completion
(not JSON, no `choices`) exits 2 with ONE stderr line that names the endpoint's URL and the
problem, and leaves no output file behind (a later run cannot mistake it for a finished one).

The backend-level behaviour (which failures are retried, the LLMError messages) is in
tests/core/test_llm.py and tests/core/test_llm_server.py; here a TSGD step (`python -m methods.tsgd
train` / `baselines` / `lm_eval`, paper-scale config with `llm.kind: endpoint`) runs as a
subprocess against `methods.core.llm_server` with fault injection, or against a closed port."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from methods.core.llm import SimBackend
from methods.core.llm_server import LLMServer
from methods.tsgd.synth import SynthConfig, generate

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: nothing listens there


def _cfg(base_url: str, transport: str = "urllib") -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())["tsgd"]
    spec = {"backend": "openai", "base_url": base_url, "model": "local", "api_key_env": None,
            "max_retries": 1, "backoff": 0.01, "timeout": 5, "transport": transport}
    cfg["llm"]["endpoints"] = [spec, spec]
    cfg["embedder"] = "hash"
    cfg["tsgd"].update(batch_size=2, val_batch=2, epochs=1, max_new_tokens=8)
    cfg["rag"]["checkpoints"] = [2]
    return cfg


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tsgd_data")
    for split, rows in generate(SynthConfig(4, 4, 4, 2, 0)).items():
        (d / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _step(step: str, cfg: dict, data: Path, out: Path) -> subprocess.CompletedProcess:
    args = {"train": ["--variant", "full", "--data", str(data), "--out", str(out / "o.json"),
                      "--trace", str(out / "t.csv")],
            "baselines": ["--data", str(data), "--out", str(out / "o.json"), "--curve", str(out / "c.csv")]}[step]
    return subprocess.run([sys.executable, "-m", "methods.tsgd", step, "--config", json.dumps(cfg), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def _one_line_error(r: subprocess.CompletedProcess, out: Path, *words: str) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("tsgd ") and ": error: LLM endpoint: " in lines[0], lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert list(out.iterdir()) == [], "a failed step left output behind"
    return lines[0]


def _answering() -> SimBackend:
    return SimBackend(lambda prompt, rng: "The answer is \\boxed{1}.")


@pytest.mark.parametrize("step, transport", [("train", "urllib"), ("baselines", "urllib"), ("train", "openai")])
def test_unreachable_endpoint(step, transport, data, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    line = _one_line_error(_step(step, _cfg(url, transport), data, tmp_path), tmp_path,
                           f"{url}/chat/completions", "2 attempts", "connection error")
    assert "Traceback" not in line


@pytest.mark.parametrize("transport", ["urllib", "openai"])
@pytest.mark.parametrize("fault, words", [(401, ["HTTP 401", "injected fault 401"]),
                                          ("garbage", ["response is not JSON"]),
                                          ("nochoices", ["malformed response", "expected 1 choices"])])
def test_bad_answers(fault, words, transport, data, tmp_path):
    with LLMServer(_answering(), faults=[fault] * 50).start() as srv:
        r = _step("train", _cfg(srv.base_url, transport), data, tmp_path)
        n_requests = len(srv.requests)
    _one_line_error(r, tmp_path, srv.base_url, *words)
    assert n_requests == 1  # a 4xx or a malformed 200 is not retried


def test_server_error_retried_then_one_line(data, tmp_path):
    """5xx is transient: retried max_retries times, then the same one-line error."""
    with LLMServer(_answering(), faults=[503] * 50).start() as srv:
        r = _step("train", _cfg(srv.base_url), data, tmp_path)
        n_requests = len(srv.requests)
    _one_line_error(r, tmp_path, srv.base_url, "2 attempts", "HTTP 503")
    assert n_requests == 2


def test_good_endpoint_same_config_runs(data, tmp_path):
    """The control: the same step and config against a healthy server exits 0 with its outputs."""
    with LLMServer(_answering()).start() as srv:
        r = _step("train", _cfg(srv.base_url), data, tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "t.csv"]
    assert json.loads((tmp_path / "o.json").read_text())["variant"] == "full"
