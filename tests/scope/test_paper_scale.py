"""SCOPE's paper-scale path on stand-ins: the released dataset's outcome table (records matched to
the pool's OpenRouter ids by the official name normalisation, costs from the price table), the
released predictor's prompt, parser and P(correct) scoring (against a direct transformers
forward pass), the hub-predictor pointers, and bad inputs refused with one line and no output."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from methods.core.config import from_dict
from methods.core.results import InputError
from methods.scope import core
from methods.scope.config import OutcomeConfig, PredictorConfig
from tests.paper_path import standins

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = {"chimera": "tngtech/deepseek-r1t2-chimera", "llama70": "meta-llama/llama-3.3-70b-instruct",
           "gemma27": "google/gemma-3-27b-it:free"}
PRICES = {"chimera": [0.3, 1.2], "llama70": [0.1, 0.32], "gemma27": [0.04, 0.15]}


# ---- pure parts ------------------------------------------------------------------------------
def test_normalize_model_name_as_the_official_code():
    n = core.normalize_model_name
    assert n("tngtech/deepseek-r1t2-chimera") == n("tngtech/deepseek-r1t2-chimera:free") == "deepseek-r1t2-chimera"
    assert n("meta-llama/llama-3.3-70b-instruct") == n("llama-3.3-70b-instruct") == n("llama-3-3-70b") == "llama-3-3-70b"
    assert n("google/gemma-3-27b-it") == "gemma-3-27b" and n("qwen/qwen3-14b") == "qwen3-14b"
    assert n("amazon/nova-2-lite-v1") == "nova-2-lite-v1" and n("openai/gpt-oss-20b") == "gpt-oss-20b"


@pytest.mark.parametrize("text,expected", [
    ("Analysis: hard.\nPredicted Performance: {len: 512, correct: yes}", (512, True)),
    ("**Analysis:** x\n**Predicted Performance:** {len: 80, correct: No}", (80, False)),     # markdown, case
    ("Analysis: a correct: no b\nPredicted Performance: {len: 9, correct: yes}", (9, False)),  # first match wins
    ("Predicted Performance: [len = 77], [correct = yes]", (77, True)),                    # section, '=' and brackets
    ("Predicted Performance: {len: 12}", (12, None)),                                       # correctness unknown
    ("no prediction at all", (None, None)),
])
def test_parse_cot_cases(text, expected):
    assert core.parse_cot(text) == expected


def test_correctness_slot_is_the_parsed_one():
    text = "Analysis: x\nPredicted Performance: {len: 9, correct:  yes}"
    head, ws = core.correctness_slot(text)
    assert head.endswith("correct:") and ws == "  " and text == head + ws + "yes}"
    assert core.correctness_slot("len: 4 only") is None


def test_cot_prompt_format():
    long_q = "z" * 250
    p = core.build_cot_prompt("qwen/qwen3-14b", "What is 2+2?", [(long_q, 120, True), ("Name a prime.", 7, False)])
    assert p.startswith("### Task\nYou are a performance prediction expert. Given a target question, 2 anchor questions")
    assert "### Target Model\nqwen/qwen3-14b\n\nExample 1:\nQuestion: " + "z" * 200 + "...\n" in p
    assert "Performance: {len: 120, correct: yes}\n\nExample 2:\nQuestion: Name a prime.\n" in p
    assert "Performance: {len: 7, correct: no}\n\n### Target Question\nWhat is 2+2?\n\n### Prediction Requirements" in p
    assert p.endswith("### Output:")
    assert "0 anchor questions" in core.build_cot_prompt("m", "q", [])


# ---- the outcome table from the dataset ---------------------------------------------------------
def _members(tmp: Path, hubs: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, hub in hubs.items():
        d = tmp / "members" / name
        d.mkdir(parents=True)
        (d / "pool_member.json").write_text(json.dumps({"name": name, "hub": hub}))
        out[name] = str(d)
    return out


def _outcome_cfg(source: str, members=tuple(MEMBERS), prices=None) -> OutcomeConfig:
    return from_dict(OutcomeConfig, {"queries": {"source": source},
                                     "pool": {"members": list(members), "unseen": members[1], "k_retrieve": 3,
                                              "prices": prices or PRICES}}, "outcomes")


@pytest.fixture(scope="module")
def scope60k(tmp_path_factory):
    d = tmp_path_factory.mktemp("scope60k")
    standins.write_dataset("scope60k", d)
    return d


def test_outcomes_from_dataset_records_and_prices(tmp_path, scope60k):
    from methods.scope.run import build_outcomes

    out = tmp_path / "outcomes.json"
    build_outcomes(_outcome_cfg(str(scope60k)), _members(tmp_path, MEMBERS), out)
    oc = json.loads(out.read_text())
    recs = {s: [json.loads(x) for x in (scope60k / "default" / f"{s}.jsonl").read_text().splitlines()]
            for s in ("anchor", "test")}
    n_anchor, n_test = (len({r["id"] for r in recs[s]}) for s in ("anchor", "test"))
    assert [it["split"] for it in oc["queries"]] == ["anchor"] * n_anchor + ["test"] * n_test
    assert oc["order"] == list(MEMBERS) and oc["unseen"] == "llama70" and oc["dropped_incomplete"] == {"anchor": 0, "test": 0}
    short = {"chimera": "deepseek-r1t2-chimera", "llama70": "llama-3-3-70b", "gemma27": "gemma-3-27b"}
    for it in oc["queries"]:
        for m in MEMBERS:
            r = next(r for r in recs[it["split"]] if r["id"] == it["id"] and r["model_name"] == short[m])
            row = oc["models"][m]["rows"][it["qid"]]
            assert it["prompt"] == r["prompt"]
            assert row["correct"] == r["is_correct"] and row["tokens"] == r["usage_completion_tokens"]
            assert row["prompt_tokens"] == r["usage_prompt_tokens"]
            pin, pout = PRICES[m]
            assert math.isclose(row["cost"], (r["usage_prompt_tokens"] * pin + r["usage_completion_tokens"] * pout) / 1e6,
                                rel_tol=1e-12)
    assert oc["models"]["gemma27"]["hub"] == MEMBERS["gemma27"]
    # retrieval: top-3 anchors by the TF-IDF cosine, sorted, never the query itself
    anchors = [it for it in oc["queries"] if it["split"] == "anchor"]
    A, Q = core.embed([a["prompt"] for a in anchors], [it["prompt"] for it in oc["queries"]])
    for it, ret in zip(oc["queries"], oc["retrieval"]):
        assert len(ret) == 3 and it["qid"] not in [a for a, _ in ret]
        sims = [s for _, s in ret]
        assert sims == sorted(sims, reverse=True)
        j = [a["qid"] for a in anchors].index(ret[0][0])
        np.testing.assert_allclose(ret[0][1], Q[it["qid"]] @ A[j] / np.linalg.norm(Q[it["qid"]]) / np.linalg.norm(A[j]),
                                   atol=1e-9)


def _broken(tmp: Path, src: Path, drop_split=None, drop_field=None) -> Path:
    d = tmp / "broken"
    (d / "default").mkdir(parents=True)
    readme = (src / "README.md").read_text()
    for s in ("train", "anchor", "test"):
        if s == drop_split:
            readme = readme.replace(f"  - split: {s}\n    path: default/{s}.jsonl\n", "")
            continue
        rows = [json.loads(x) for x in (src / "default" / f"{s}.jsonl").read_text().splitlines()]
        for r in rows:
            r.pop(drop_field, None)
        (d / "default" / f"{s}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "README.md").write_text(readme)
    return d


def _run_outcomes(cfg: dict, members: dict[str, str], out: Path):
    cmd = [sys.executable, "-m", "methods.scope", "outcomes", "--config", json.dumps(cfg), "--members", *members.values(),
           "--out", str(out), "--threads", "1"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_missing_anchor_split_is_one_line_error_and_no_output(tmp_path, scope60k):
    src = _broken(tmp_path, scope60k, drop_split="anchor")
    cfg = {"queries": {"source": str(src)},
           "pool": {"members": list(MEMBERS), "unseen": "llama70", "k_retrieve": 3, "prices": PRICES}}
    out = tmp_path / "outcomes.json"
    proc = _run_outcomes(cfg, _members(tmp_path, MEMBERS), out)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert last.startswith("scope outcomes: error: cannot load dataset") and "split 'anchor'" in last, last
    assert not out.exists() and not list(tmp_path.glob("outcomes*"))


def test_missing_field_and_unknown_model_are_one_line_errors(tmp_path, scope60k):
    from methods.scope.run import build_outcomes

    src = _broken(tmp_path, scope60k, drop_field="usage_completion_tokens")
    out = tmp_path / "outcomes.json"
    with pytest.raises(InputError, match=r"split 'anchor' has no field\(s\) \['usage_completion_tokens'\]"):
        build_outcomes(_outcome_cfg(str(src)), _members(tmp_path / "a", MEMBERS), out)
    hubs = {**MEMBERS, "gemma27": "x-ai/grok-4.1-fast"}
    with pytest.raises(InputError, match=r"no records of pool member\(s\) \[\('gemma27', 'x-ai/grok-4.1-fast'\)\]"):
        build_outcomes(_outcome_cfg(str(scope60k)), _members(tmp_path / "b", hubs), out)
    trained = tmp_path / "c" / "members" / "gemma27"
    trained.mkdir(parents=True)
    (trained / "pool_member.json").write_text(json.dumps({"name": "gemma27", "mix_arith": 0.5}))
    dirs = {**_members(tmp_path / "c2", {k: v for k, v in MEMBERS.items() if k != "gemma27"}), "gemma27": str(trained)}
    with pytest.raises(InputError, match="pool member gemma27: a trained member has no record"):
        build_outcomes(_outcome_cfg(str(scope60k)), dirs, out)
    assert not out.exists()


# ---- the released predictor ------------------------------------------------------------------
DECODE = {"max_new_tokens": 8, "temperature": 0.0, "top_p": 1.0, "batch_size": 4, "seed": 0}


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen3")
    rng = random.Random(0)
    standins.write_model("qwen3", d, [standins.corpus_text(rng, 8) for _ in range(200)] + [core.COT_TAIL] * 5)
    return d


def test_hub_predictor_steps_write_pointers(tmp_path):
    from methods.scope.run import predictor_info, train_grpo, train_sft

    cfg = from_dict(PredictorConfig, {"hub": "org/predictor", "k_prompt": 5, "seed": 0, "decode": DECODE}, "predictor")
    train_sft(cfg, "unused", "noanchor", tmp_path / "no")
    train_grpo(cfg, "unused", "unused", tmp_path / "rl")
    assert predictor_info(tmp_path / "no") == {"variant": "noanchor", "k": 0, "hub": "org/predictor", "decode": DECODE}
    assert predictor_info(tmp_path / "rl")["k"] == 5 and sorted(p.name for p in (tmp_path / "rl").iterdir()) == [
        "scope_predictor.json"]


def test_predict_hub_p_correct_matches_a_forward_pass(qwen3, monkeypatch):
    """P(correct) = softmax over the log-probs of `yes` / `no` at the parsed slot, checked against
    transformers directly; lengths parsed, an unparsable completion gets 0.5 and the median length."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from methods.core.llm import HFBackend
    from methods.scope.run import predict_hub

    outs = ["Analysis: short.\nPredicted Performance: {len: 42, correct: yes}",
            "Analysis: long.\nPredicted Performance: {len: 300, correct: no}", "garbled"]
    monkeypatch.setattr(HFBackend, "chat", lambda self, convs, **kw: [[outs[i]] for i in range(len(convs))])
    exs = [{"prompt": f"question {i}"} for i in range(3)]
    pr = predict_hub({"hub": str(qwen3), "decode": DECODE}, exs)
    tok, model = AutoTokenizer.from_pretrained(qwen3), AutoModelForCausalLM.from_pretrained(qwen3).eval()

    def logp(prefix, cont):
        a, b = tok(prefix)["input_ids"], tok(cont, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([a + b])).logits[0].double(), -1)
        return sum(float(lp[len(a) - 1 + j, t]) for j, t in enumerate(b))

    for i in range(2):
        chat = tok.apply_chat_template([{"role": "user", "content": exs[i]["prompt"]}], tokenize=False,
                                       add_generation_prompt=True)
        head = chat + outs[i][:outs[i].index("correct:") + len("correct:")]
        ref = 1.0 / (1.0 + math.exp(logp(head, " no") - logp(head, " yes")))
        assert pr[i]["pred_correct"] == pytest.approx(ref, abs=1e-5) and pr[i]["parsed"]
    assert [p["pred_len"] for p in pr] == [42, 300, 171] and pr[2]["pred_correct"] == 0.5 and not pr[2]["parsed"]
