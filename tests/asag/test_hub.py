"""Paper-scale decoding (methods/asag/hub.py) on tiny random Qwen3 / Qwen2 models of the real
classes with Qwen-convention tokenizers: the window attention recomputed over the cached prefix
equals transformers' eager attention of a full forward pass; the probe leaves the cache as it
was and its confidence is the hand-computed mean; without the entropy gate ASAG makes DEER's
exits; answer grading, benchmark readers, and bad input at paper scale (one-line errors, no
output)."""
import json
import random
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from methods.asag import bench, grade
from methods.asag.config import DecodeConfig, Policy
from methods.asag.hub import PROBE, HubDecoder, chat_prompt
from methods.asag.signals import attention_state
from tests.paper_path import standins
from tests.workflow.conftest import ROOT, snakemake_env

torch.set_num_threads(1)
CFG = DecodeConfig(budget=48, probe_max=4, window_cap=16, n_last_layers=4, inject_weight=0.05, n_problems=0,
                   policies=[])


@pytest.fixture(scope="module", params=["qwen3", "qwen2"])
def lm(request):
    rng = random.Random(0)
    texts = [standins.corpus_text(rng, 4) for _ in range(60)] + ["".join(standins._problem(rng)) for _ in range(60)]
    tok = standins.build_tokenizer("qwen", texts, vocab_size=400)
    m = standins.build_model(request.param, tok).eval()
    with torch.no_grad():  # sharper attention than the 0.02 init so rows differ
        for n, p in m.named_parameters():
            if "q_proj" in n or "k_proj" in n:
                p.mul_(30)
    return m, tok


def _prompt(tok):
    return chat_prompt(tok, "What is $(3+4) \\times 2$?", "standin")


def test_window_attention_over_cache_equals_full_eager(lm):
    from transformers import DynamicCache

    m, tok = lm
    dec = HubDecoder(m, tok, CFG, 0.75)
    ids = _prompt(tok) + tok("Okay so 3 plus 4 is 7 and 7 times 2 is 14", add_special_tokens=False)["input_ids"]
    T = len(ids)
    _, cache = dec._feed(ids, DynamicCache())
    rows = range(T - 9, T)
    prev, cur = (T - 20, T - 9), (T - 9, T)
    got = dec.attention(ids, cache, rows, prev, cur)
    assert cache.get_seq_length() == T and m.config._attn_implementation == "sdpa"
    m.set_attn_implementation("eager")
    with torch.no_grad():
        out = m(input_ids=torch.tensor([ids]), output_attentions=True)
    m.set_attn_implementation("sdpa")
    want = attention_state(out.attentions, rows, prev, cur, min(4, len(out.attentions)))
    assert got["H"] == pytest.approx(want["H"], rel=1e-5, abs=1e-6)
    assert got["mass_prev"] == pytest.approx(want["mass_prev"], abs=1e-6)
    assert got["mass_cur"] == pytest.approx(want["mass_cur"], abs=1e-6)
    assert got["trap"] == want["trap"]
    assert 0 < want["H"] < 2 * m.config.num_attention_heads   # ≤ 1 per head and layer (2 layers)


def test_probe_confidence_and_cache_restored(lm):
    from transformers import DynamicCache

    m, tok = lm
    dec = HubDecoder(m, tok, CFG, 0.75)
    ids = _prompt(tok)
    logits0, cache = dec._feed(ids, DynamicCache())
    toks, text, conf = dec.probe(ids, cache)
    assert cache.get_seq_length() == len(ids)
    # the cache is the prefix's: the next-token logits after it are unchanged
    nxt = int(logits0.argmax())
    a, _ = dec._feed([nxt], cache)
    with torch.no_grad():
        b = m(input_ids=torch.tensor([ids + [nxt]])).logits[0, -1].float()
    assert torch.allclose(a, b, atol=1e-4)
    # confidence = mean greedy probability of the answer tokens, from uncached forwards
    seq, probs = ids + tok(PROBE, add_special_tokens=False)["input_ids"], []
    for t in toks:
        with torch.no_grad():
            p = torch.softmax(m(input_ids=torch.tensor([seq])).logits[0, -1].float(), -1)
        assert int(p.argmax()) == t
        probs.append(float(p[t]))
        seq.append(t)
    assert conf == pytest.approx(sum(probs) / len(probs) if probs else 0.0, abs=1e-5)
    assert text == tok.decode(toks).strip()


def test_nogate_equals_deer_and_atps_recorded(lm):
    """With the ATP word set to the random model's own favourite token, ATPs occur; ASAG with α = +∞
    and no injection makes exactly DEER's exits (claim C4), and vanilla logs H and ΔH."""
    from transformers import DynamicCache

    m, tok = lm
    ids = _prompt(tok)
    logits, _ = HubDecoder(m, tok, CFG, 0.75)._feed(ids, DynamicCache())
    word = tok.decode([int(logits.argmax())]).strip()
    if not word:
        pytest.skip("the random model's first greedy token is whitespace")
    pol = dict(lam=0.5, alpha=-0.1, max_jumps=2, inject=False, jump=False)
    runs = {}
    for name, kind, extra in (("deer", "deer", {}), ("nogate", "asag", {"alpha": 1e9}), ("vanilla", "vanilla", {}),
                              ("asag", "asag", {"inject": True, "jump": True})):
        dec = HubDecoder(m, tok, CFG, 0.75, atp_words=(word,))
        with torch.no_grad():
            runs[name] = dec.run(ids, Policy(name=name, kind=kind, **{**pol, **extra}))
    assert runs["vanilla"]["n_atps"] >= 1
    d, g = runs["deer"], runs["nogate"]
    assert (d["exit"], d["tokens"], d["answer"], d["text"]) == (g["exit"], g["tokens"], g["answer"], g["text"])
    assert [a["action"] for a in d["atps"]] == [a["action"] for a in g["atps"]]
    v = runs["vanilla"]["atps"]
    assert all("H" in a and "dH" in a for a in v) and v[0]["dH"] == 0.0
    assert runs["vanilla"]["exit"] in ("budget", "natural", "closed")
    assert runs["vanilla"]["think_tokens"] <= int(CFG.budget * 0.75) + len(tok("\n</think>\n\n")["input_ids"])


@pytest.mark.parametrize("pred,gold,ok", [
    ("72", "72", True), ("72.0", "72", True), ("\\frac{1}{2}", "0.5", True), ("1/2", "\\dfrac{1}{2}", True),
    ("x = 3", "3", True), ("1,000", "1000", True), ("2\\sqrt{2}", "\\sqrt{8}", True), ("$27$", "27", True),
    ("73", "72", False), (None, "72", False), ("\\frac{1}{3}", "0.33", False)])
def test_math_equal(pred, gold, ok):
    assert grade.math_equal(pred, gold) is ok


def test_last_boxed_and_choice():
    assert grade.last_boxed("a \\boxed{1} then \\boxed{\\frac{2}{3}} end") == "\\frac{2}{3}"
    assert grade.last_boxed("no box") is None
    assert grade.correct("B", "B", "choice") and grade.correct("\\text{(C)}", "C", "choice")
    assert not grade.correct("A", "B", "choice")


@pytest.fixture(scope="module")
def datasets_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("asag_bench")
    for kind in ("gsm8k", "gpqa", "olympiadbench", "amc23", "aime2025_oc"):
        standins.write_dataset(kind, out / kind)
    return out


def test_benchmark_readers(datasets_dir):
    g = bench.records(str(datasets_dir / "gsm8k"), 0)
    raw = [json.loads(l) for l in (datasets_dir / "gsm8k" / "main" / "test.jsonl").read_text().splitlines()]
    assert len(g) == len(raw) and g[0]["answer"] == raw[0]["answer"].split("####")[-1].strip()
    q = bench.records(str(datasets_dir / "gpqa"), 0)
    rawq = [json.loads(l) for l in (datasets_dir / "gpqa" / "gpqa_diamond" / "train.jsonl").read_text().splitlines()]
    assert len(q) == len(rawq)  # only the diamond subset
    for r, x in zip(q, rawq):   # the gold letter labels the correct answer's text
        assert f"{r['answer']}) {x['Correct Answer']}" in r["question"]
    assert bench.records(str(datasets_dir / "amc23"), 0)[0]["answer"].isdigit()   # 27.0 → "27"
    assert len(bench.records(str(datasets_dir / "aime2025_oc"), 0)) == 12        # both subsets
    o = bench.records(str(datasets_dir / "olympiadbench"), 0)
    assert len(o) == 8 and not o[0]["answer"].startswith("$")


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "methods.asag", *args], cwd=ROOT, env={**snakemake_env(), **(env or {})},
                          capture_output=True, text=True, timeout=300)


def test_data_step_refuses_a_benchmark_without_its_field(datasets_dir, tmp_path):
    broken = tmp_path / "gsm8k"
    standins.write_dataset("gsm8k", broken)
    for f in broken.rglob("*.jsonl"):
        rows = [json.loads(l) for l in f.read_text().splitlines()]
        f.write_text("".join(json.dumps({"problem": r["question"], "answer": r["answer"]}) + "\n" for r in rows))
    out = tmp_path / "data"
    paper = {"models": ["x/y"], "benchmarks": [str(broken)], "think_ratio": 0.9}
    data = {"n_train": 1, "n_test": 1, "p_mul": 0.3, "max_operand": 9, "max_rechecks": 1, "p_late_slip": 0.1,
            "p_first_slip": 0.1, "p_loop": 0.1, "max_len": 160, "seed": 0}
    # a fresh datasets cache: the broken copy must not be served from an earlier load of the same path
    p = _cli("data", "--config", json.dumps(data), "--paper", json.dumps(paper), "--out", str(out),
             env={"HF_DATASETS_CACHE": str(tmp_path / "hf_cache")})
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "has no field(s) ['question']" in last and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_decode_step_refuses_a_model_without_chat_template(lm, tmp_path):
    m, tok = lm
    mdir = tmp_path / "lrm"
    m.save_pretrained(mdir, safe_serialization=True)
    tok.chat_template = None
    tok.save_pretrained(mdir)
    (mdir / "chat_template.jinja").unlink(missing_ok=True)
    cfgfile = json.loads((mdir / "tokenizer_config.json").read_text())
    cfgfile.pop("chat_template", None)
    (mdir / "tokenizer_config.json").write_text(json.dumps(cfgfile))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "hub.json").write_text(json.dumps({"hub_id": str(mdir)}))
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text(json.dumps({"benchmark": "gsm8k", "id": "main/0", "question": "1+1?",
                                                 "answer": "2", "kind": "math"}) + "\n")
    pol = {"name": "deer", "kind": "deer", "lam": 0.95, "alpha": -0.1, "max_jumps": 2, "inject": False, "jump": False}
    cfg = {**{k: getattr(CFG, k) for k in ("budget", "probe_max", "window_cap", "n_last_layers", "inject_weight",
                                          "n_problems")}, "policies": [pol]}
    paper = {"models": [str(mdir)], "benchmarks": [], "think_ratio": 0.75}
    out = tmp_path / "runs" / "deer.jsonl"
    p = _cli("decode", "--config", json.dumps(cfg), "--paper", json.dumps(paper), "--model", str(model_dir),
             "--data", str(data), "--policy", "deer", "--out", str(out))
    assert p.returncode == 2, p.stderr
    err = [l for l in p.stderr.strip().splitlines() if "error" in l]
    assert len(err) == 1 and "has no chat template" in err[0], p.stderr
    assert not out.exists()
    # the headline model must be one of the decoded models
    p = _cli("decode", "--config", json.dumps(cfg), "--paper", json.dumps({**paper, "models": ["a/b"]}),
             "--model", str(model_dir), "--data", str(data), "--policy", "deer", "--out", str(out))
    assert p.returncode == 2 and "is not one of 'paper.models'" in p.stderr.strip().splitlines()[-1]
    assert not out.exists()


def test_take_per_benchmark():
    from methods.asag.decode import take_per_benchmark

    rows = [{"benchmark": b, "k": i} for i, b in enumerate("aabbbc")]
    assert [r["k"] for r in take_per_benchmark(rows, 1)] == [0, 2, 5]
    assert take_per_benchmark(rows, 0) == rows
    tiny = [{"k": i} for i in range(5)]
    assert take_per_benchmark(tiny, 3) == tiny[:3]


def test_policy_replace_keeps_fields():
    # the test policies above are built from keyword dicts; a sanity check that Policy has no defaults
    p = Policy(name="x", kind="deer", lam=0.9, alpha=-0.1, max_jumps=1, inject=False, jump=False)
    assert replace(p, lam=0.5).lam == 0.5
