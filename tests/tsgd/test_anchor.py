"""The lm-eval anchor (paper scale): lm-eval's `local-chat-completions` model evaluates the solver
served by our OpenAI-compatible server, zero-shot and with the optimised library in the system
prompt. The served solver here is a simulator whose answers are known in closed form: it answers
the stand-in task's question correctly iff the library's rule is in the system prompt, or (zero-
shot) iff the answer is even. lm-eval's exact_match must equal those fractions, task by task and
pooled, and the gain must be their difference. Bad endpoints fail the step with one line."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from methods.core.evaluate import LM_EVAL_TASKS_ENV
from methods.core.llm import SimBackend
from methods.core.llm_server import LLMServer
from methods.tsgd.anchor import run_anchor, system_prompt
from methods.tsgd.prompts import SOLVER_SYSTEM
from tests.paper_path.standins import write_lm_eval_tasks

ROOT = Path(__file__).resolve().parents[2]
RULE = "Simplify fractions before comparing them."
TASKS = {"hendrycks_math500": 6, "aime24": 4}


def _cfg(base_url: str, **lm_eval) -> str:
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())["tsgd"]
    spec = {"backend": "openai", "base_url": base_url, "model": "local", "api_key_env": None,
            "max_retries": 0, "backoff": 0.01, "timeout": 5}
    cfg["llm"]["endpoints"] = [spec, spec]
    cfg["tsgd"]["max_new_tokens"] = 8
    cfg["lm_eval"].update(tasks=list(TASKS), num_concurrent=2, max_retries=0, timeout=10, **lm_eval)
    return json.dumps(cfg)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm_eval_tasks")
    write_lm_eval_tasks(d, {t: {"output_type": "generate_until", "n": n} for t, n in TASKS.items()})
    rows = {t: [json.loads(x) for x in (d / f"{t}.jsonl").read_text().splitlines()] for t in TASKS}
    return d, rows


def _solver(answers: dict[str, str], seen: list[str]) -> SimBackend:
    def respond(prompt: str, rng) -> str:
        seen.append(prompt)
        m = re.search(r"Q: (.*)\nA:", prompt)
        if m is None:  # the step's pre-flight request
            return "2"
        a = answers[m.group(1)]
        right = RULE in prompt or int(a) % 2 == 0
        return f" {a}" if right else f" {int(a) + 1}"
    return SimBackend(respond)


def _library(tmp_path: Path, rules: list[str]) -> str:
    p = tmp_path / "full.json"
    p.write_text(json.dumps({"variant": "full", "library": {"capacity": 30, "rules": rules, "utility": []}}))
    return str(p)


def test_lm_eval_scores_match_closed_form(tasks, tmp_path, monkeypatch):
    d, rows = tasks
    monkeypatch.setenv(LM_EVAL_TASKS_ENV, str(d))
    answers = {r["question"]: r["answer"] for rs in rows.values() for r in rs}
    seen: list[str] = []
    with LLMServer(_solver(answers, seen)).start() as srv:
        res = run_anchor(_cfg(srv.base_url), _library(tmp_path, [RULE]), str(tmp_path / "a.json"))
        chat = [r for r in srv.requests if r["path"].endswith("/chat/completions")]
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["systems"] == res["systems"] and saved["gain_over_zero_shot"] == res["gain_over_zero_shot"]
    zs, ts = res["systems"]["zero_shot"], res["systems"]["tsgd_full"]
    even = {t: sum(int(r["answer"]) % 2 == 0 for r in rs) for t, rs in rows.items()}
    for t, n in TASKS.items():
        assert zs["tasks"][t] == {"exact_match": pytest.approx(even[t] / n, abs=1e-12), "n": n}
        assert ts["tasks"][t] == {"exact_match": pytest.approx(1.0, abs=1e-12), "n": n}
    n = sum(TASKS.values())
    assert zs["exact_match"] == pytest.approx(sum(even.values()) / n, abs=1e-12)
    assert res["gain_over_zero_shot"] == pytest.approx(1 - sum(even.values()) / n, abs=1e-12)
    assert 0 < sum(even.values()) < n  # the comparison is not degenerate
    # what reached the server: lm-eval's chat requests (plus our one pre-flight), the system
    # prompt ours, the library's rule only in the second system's, the generation budget ours
    lm = [r for r in chat if r["body"]["messages"][0]["role"] == "system"]
    assert len(lm) == 2 * n and len(chat) == 2 * n + 1
    systems = [r["body"]["messages"][0]["content"] for r in lm]
    assert set(systems) == {system_prompt([]), system_prompt([RULE])}
    assert system_prompt([]) == SOLVER_SYSTEM and RULE in system_prompt([RULE])
    assert all(r["body"]["max_tokens"] == 8 and r["body"]["temperature"] == 0 for r in lm)


def _cli(cfg: str, lib: str, out: Path, env_dir: Path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "methods.tsgd", "lm_eval", "--config", cfg, "--library", lib,
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, LM_EVAL_TASKS_ENV: str(env_dir)})


@pytest.mark.parametrize("fault, words", [(None, ["connection error"]), (401, ["HTTP 401"]),
                                          ("garbage", ["not JSON"]), ("nochoices", ["malformed"])])
def test_bad_endpoint_is_one_line_exit_2_no_output(fault, words, tasks, tmp_path):
    import socket

    d, _ = tasks
    lib, out = _library(tmp_path, [RULE]), tmp_path / "out" / "a.json"
    if fault is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        r = _cli(_cfg(url), lib, out, d)
    else:
        with LLMServer(SimBackend(lambda p, rng: "1"), faults=[fault] * 10).start() as srv:
            url = srv.base_url
            r = _cli(_cfg(url), lib, out, d)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "lm-eval anchor: solver endpoint " + url in lines[0], r.stderr[-2000:]
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_library_larger_than_the_context_is_refused(tasks, tmp_path, monkeypatch):
    from methods.core.results import InputError

    with pytest.raises(InputError, match="more than tsgd.max_full_context"):
        run_anchor(_cfg("http://127.0.0.1:9/v1"), _library(tmp_path, [f"r{i}" for i in range(31)]),
                   str(tmp_path / "a.json"))
