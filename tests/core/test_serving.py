"""The served-model part of core (methods/core/serving/): the `serving:` entries and `serve:`
specs, the address file, make_llm's `base_url_file`, provenance without secrets, the serving
process (start, publish, answer like the model itself, stop with its whole process group), and a
DAG step's one-line errors against a served address that failed, is unreachable, refuses the key
(401) or answers garbage (no output left behind)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from methods.core import serving as S
from methods.core.llm import HFBackend, OpenAIBackend, llm_provenance, make_llm
from methods.core.llm_server import LLMServer
from methods.core.results import InputError, provenance, write_json
from tests.core.test_llm import PROMPTS, tiny_dir  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# ------------------------------------------------------------------ config and specs
def test_check_serving_defaults_and_errors():
    out = S.check_serving({"a": {"model": "org/m"}, "b": {"model": "dag:models/x", "engine": "local",
                                                         "gpus": 2, "args": ["--x", 3]}}, "p.serving")
    assert out["a"] == {"model": "org/m", "engine": "vllm", "gpus": None, "args": [], "ready_timeout_s": 1800}
    assert out["b"]["args"] == ["--x", "3"] and out["b"]["gpus"] == 2
    assert S.check_serving(None, "k") == {}
    for bad, words in [({"a": {"model": "m", "engine": "tgi"}}, "p.serving.a.engine"),
                       ({"a": {"model": "m", "port": 1}}, "unknown key(s) ['port']"),
                       ({"a": {"engine": "vllm"}}, "p.serving.a.model"),
                       ({"a": {"model": "m", "gpus": 0}}, "p.serving.a.gpus"),
                       ({"a": {"model": "m", "args": "--x"}}, "p.serving.a.args"),
                       ({"a": {"model": "m", "args": ["--api-key", "sk-1"]}}, "set VLLM_API_KEY in the environment"),
                       ({"a": {"model": "m", "args": ["--hf-token=hf_x"]}}, "--hf-token would put a secret"),
                       ({"a b": {"model": "m"}}, "p.serving.a b"),
                       ([1], "expected a mapping")]:
        with pytest.raises(InputError, match=None) as e:
            S.check_serving(bad, "p.serving")
        assert words in str(e.value) and "\n" not in str(e.value)


def test_serve_refs_and_resolution():
    serving = S.check_serving({"m1": {"model": "org/m"}}, "p.serving")
    S.check_serve_refs([("p.a", {"backend": "openai", "serve": "m1"}),
                        ("p.b", {"backend": "openai", "base_url": "https://api/v1", "model": "x"})], serving, "p.serving")
    with pytest.raises(InputError, match=r"'p.a.serve': 'm2' is not an entry of 'p.serving' \(entries: \['m1'\]\)"):
        S.check_serve_refs([("p.a", {"serve": "m2"})], serving, "p.serving")
    with pytest.raises(InputError, match="either serve or base_url"):
        S.check_serve_refs([("p.a", {"serve": "m1", "base_url": "http://x/v1"})], serving, "p.serving")
    S.check_serve_refs([("p.a", {"serve": "m1", "base_url": None})], serving, "p.serving")  # null = absent
    spec = {"backend": "openai", "serve": "m1", "concurrency": 4}
    assert S.resolve_spec(spec, "/r/a.json") == {"backend": "openai", "concurrency": 4, "base_url_file": "/r/a.json"}
    assert S.resolve_spec({"backend": "sim"}, None) == {"backend": "sim"}
    with pytest.raises(InputError, match="no address file"):
        S.resolve_spec(spec, None)


# ------------------------------------------------------------------ address file
def _ready(path, base_url="http://127.0.0.1:1/v1", model="org/m"):
    write_json(path, {"status": "ready", "base_url": base_url, "model": model, "name": "m1", "engine": "local",
                      "pid": 1, "host": "h", "gpus": 1})


def test_read_address_waits_for_ready(tmp_path):
    p = tmp_path / "a.json"
    write_json(p, {"status": "starting"})
    threading.Timer(0.4, _ready, args=(p,)).start()
    t0 = time.monotonic()
    addr = S.read_address(p, wait_s=10, poll_s=0.05)
    assert addr["base_url"] == "http://127.0.0.1:1/v1" and time.monotonic() - t0 >= 0.35


def test_waiting_consumer_stops_when_its_job_is_gone(tmp_path):
    """A consumer waiting for an address file that will never appear (its job group was killed,
    the server with it) stops as soon as its parent, the job's shell, is gone: it does not wait
    out its hour. The shell starts the waiter in the background, prints its pid and exits."""
    waiter = (f"from methods.core.serving import read_address; "
              f"read_address({str(tmp_path / 'never.json')!r}, wait_s=600, poll_s=0.05)")
    err = tmp_path / "waiter.err"
    sh = subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" 2>{err} & echo $!; sleep 0.5', waiter],
                        cwd=ROOT, capture_output=True, text=True, timeout=60)
    pid = int(sh.stdout.split()[0])
    deadline = time.monotonic() + 30   # python start-up + one poll after the shell exits
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
    lines = [l for l in err.read_text().splitlines() if l.strip()]
    assert lines and "the job that started this step is gone" in lines[-1], lines


@pytest.mark.parametrize("content, words", [
    (None, "did not appear after 0.3 s"),
    ({"status": "starting"}, "still says the server is starting"),
    ("{not json", "is corrupt"),
    ({"status": "failed", "error": "server m1 (vllm) exited with status 1"}, "failed to start: server m1 (vllm) exited"),
    ({"status": "ready", "base_url": "http://x/v1"}, "missing ['model']"),
])
def test_read_address_errors_are_one_line(tmp_path, content, words):
    p = tmp_path / "a.json"
    if isinstance(content, dict):
        write_json(p, content)
    elif content is not None:
        p.write_text(content)
    with pytest.raises(InputError) as e:
        S.read_address(p, wait_s=0.3, poll_s=0.05)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_make_llm_base_url_file_and_provenance(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    _ready(p, "http://127.0.0.1:9/v1", "org/served")
    llm = make_llm({"backend": "openai", "base_url_file": str(p), "api_key_env": "SECRET_ENV", "concurrency": 3})
    assert isinstance(llm, OpenAIBackend) and (llm.base_url, llm.model, llm.concurrency) == (
        "http://127.0.0.1:9/v1", "org/served", 3)
    assert llm.served["name"] == "m1" and llm.served["engine"] == "local"
    # the spec's own model name wins over the served one
    assert make_llm({"backend": "openai", "base_url_file": str(p), "model": "alias"}).model == "alias"
    with pytest.raises(InputError, match="both base_url and base_url_file"):
        make_llm({"backend": "openai", "base_url_file": str(p), "base_url": "http://y/v1"})
    # old specs are untouched
    old = make_llm({"backend": "openai", "base_url": "http://h:1/v1", "model": "m"})
    assert not hasattr(old, "served")
    # provenance: what answered and how; never a key, credentials or a query string
    monkeypatch.setenv("SECRET_ENV", "sk-very-secret")
    hosted = make_llm({"backend": "openai", "base_url": "https://user:pw@api.example.com/v1?key=abc", "model": "g",
                       "api_key_env": "SECRET_ENV"})
    prov = provenance(llm={"a": llm_provenance(llm, {"temperature": 0.7}), "b": llm_provenance(hosted)})
    assert prov["llm"]["a"] == {"backend": "OpenAIBackend", "model": "org/served", "base_url": "http://127.0.0.1:9/v1",
                                "served": {"name": "m1", "engine": "local", "model": "org/served", "host": "h",
                                           "pid": 1, "gpus": 1},
                                "sampling": {"temperature": 0.7}}
    assert prov["llm"]["b"]["base_url"] == "https://api.example.com/v1"
    blob = json.dumps(prov)
    assert "sk-very-secret" not in blob and "pw" not in blob and "abc" not in blob
    assert "llm" not in provenance()  # no llm: the block is as before


# ------------------------------------------------------------------ the serving process
def _serve(tiny, addr: Path, log: Path, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "methods.core.serving", "serve", "--name", "tiny", "--model",
                             str(tiny), "--served-name", "org/tiny", "--engine", "local", "--address", str(addr),
                             *extra], cwd=ROOT, stderr=open(log, "w"))


def _pids(log: Path) -> tuple[int, int]:
    import re

    m = re.search(r"server pid (\d+) .*serving process pid (\d+)", log.read_text())
    assert m, log.read_text()
    return int(m.group(1)), int(m.group(2))


def test_serve_answers_like_the_model_and_stops_its_group(tiny_dir, tmp_path):  # noqa: F811
    addr, log = tmp_path / "a.json", tmp_path / "serve.log"
    proc = _serve(tiny_dir, addr, log)
    try:
        info = S.read_address(addr, wait_s=120)
        assert info["model"] == "org/tiny" and info["engine"] == "local" and info["base_url"].startswith("http://127.0.0.1:")
        llm = make_llm({"backend": "openai", "base_url_file": str(addr), "api_key_env": None})
        ref = HFBackend(str(tiny_dir), device="cpu", dtype="float32")
        # greedy completions and log-prob scores through the served model = the model itself
        assert llm.generate(PROMPTS, max_new_tokens=6) == ref.generate(PROMPTS, max_new_tokens=6)
        got, want = llm.score(PROMPTS, [" ab"] * len(PROMPTS)), ref.score(PROMPTS, [" ab"] * len(PROMPTS))
        assert all(abs(a - b) < 1e-4 for g, w in zip(got, want) for a, b in zip(g, w))
        server, wrapper = _pids(log)
        assert info["pid"] == server and alive(server)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    assert rc == 0
    assert not alive(server) and not addr.exists()
    assert "stopped" in log.read_text()


def test_server_dies_with_a_killed_serving_process(tiny_dir, tmp_path):  # noqa: F811
    """SIGKILL (what Snakemake sends a group whose consumer failed): no cleanup runs, yet the server
    gets its parent-death signal."""
    addr, log = tmp_path / "a.json", tmp_path / "serve.log"
    proc = _serve(tiny_dir, addr, log)
    S.read_address(addr, wait_s=120)
    server, _ = _pids(log)
    assert alive(server)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 20
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server)


def test_server_that_cannot_start_fails_its_consumers_at_once(tmp_path):
    addr, log = tmp_path / "a.json", tmp_path / "serve.log"
    proc = _serve(tmp_path / "no_such_model", addr, log, "--ready-timeout-s", "60")
    assert proc.wait(timeout=120) == 2
    with pytest.raises(InputError, match="failed to start: server tiny .local. exited with status"):
        S.read_address(addr, wait_s=1)
    assert "error: server tiny (local) exited" in log.read_text()


# ------------------------------------------------------------------ a step's errors (pse run)
@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pse") / "scenarios.jsonl"
    cfg = {"seeds": 1, "persist_seeds": 1, "pipeline_seeds": 1, "stages": 2, "defence_seeds": 1, "control_seeds": 1,
           "horizon": 1, "seed": 0, "max_new_tokens": 4}
    subprocess.run([sys.executable, "-m", "methods.pse", "scenarios", "--config", json.dumps(cfg), "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    return out


def _pse_run(addr: Path, scenarios: Path, out: Path) -> subprocess.CompletedProcess:
    spec = {"backend": "openai", "base_url_file": str(addr), "api_key_env": "PSE_TEST_KEY", "max_retries": 1,
            "backoff": 0.01, "timeout": 5, "wait_s": 2}
    return subprocess.run([sys.executable, "-m", "methods.pse", "run", "--config", json.dumps({"name": "a", "spec": spec}),
                           "--scenarios", str(scenarios), "--out", str(out / "a.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PSE_TEST_KEY": "sk-test-secret"})


def _one_line(r, out: Path, *words):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m methods.pse run: error: "), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert "sk-test-secret" not in r.stderr
    assert not (out / "a.jsonl").exists()


def test_step_errors_against_a_served_address(scenarios, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    addr = tmp_path / "a.json"
    # never published (its server job is not running): waits wait_s, then one line
    _one_line(_pse_run(addr, scenarios, out), out, "did not appear after 2 s")
    write_json(addr, {"status": "failed", "error": "server m1 (vllm) did not answer within 1800 s"})
    _one_line(_pse_run(addr, scenarios, out), out, "failed to start", "did not answer within 1800 s")
    # published but unreachable (the server is gone)
    from tests.core.test_llm_errors import _closed_port

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    _ready(addr, url)
    _one_line(_pse_run(addr, scenarios, out), out, "LLM endpoint", url, "connection error")


@pytest.mark.parametrize("fault, words", [(401, ["HTTP 401"]), ("garbage", ["not JSON"]),
                                          ("nochoices", ["malformed response"])])
def test_step_errors_from_a_served_model(scenarios, tmp_path, fault, words):
    from methods.core.llm import SimBackend

    out = tmp_path / "out"
    out.mkdir()
    with LLMServer(SimBackend(lambda p, rng: "fine"), faults=[fault] * 50).start() as srv:
        _ready(tmp_path / "a.json", srv.base_url)
        r = _pse_run(tmp_path / "a.json", scenarios, out)
        n = len(srv.requests)
    _one_line(r, out, srv.base_url, *words)
    assert n == 1  # not retried
