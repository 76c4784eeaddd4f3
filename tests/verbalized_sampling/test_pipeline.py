"""End-to-end pieces: tiny LM sampling through the backend layer (local and over HTTP give
the same samples), the C5 SimBackend sweep, claim metrics, and the CLI's bad-config error."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from methods.core.llm import OpenAIBackend
from methods.core.llm_server import LLMServer
from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from methods.verbalized_sampling import lm, prompts as P
from methods.verbalized_sampling.analysis import AnalysisConfig, sim_threshold_sweep
from methods.verbalized_sampling.world import WorldConfig, build_world, sample_doc
from tests.workflow.conftest import ROOT

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def world():
    return build_world(WorldConfig(n_topics=3, pool_size=20, zipf_s=1.1, k=5, alpha=0.6, n_pref_prompts=50,
                                   responses_per_prompt=4, seed=0))


@pytest.fixture(scope="module")
def tiny(world):
    cfg = lm.PretrainConfig(model=ModelConfig(d_model=32, n_layers=1, n_heads=4, d_ff=64, max_seq_len=64),
                            train=TrainConfig(steps=80, batch_size=16, lr=1e-2, warmup_steps=5), seed=0)
    model, tok, rows = lm.pretrain(world, cfg)
    return model, tok, rows


def test_pretraining_learns_and_world_docs_are_in_vocab(world, tiny):
    model, tok, rows = tiny
    assert rows[-1]["loss"] < 0.6 * rows[0]["loss"] and rows[0]["step"] == 10
    doc = sample_doc(world, np.random.default_rng(0), "vs")
    assert tok.unk_token_id not in tok(doc)["input_ids"]


def test_sampling_local_equals_http_server(world, tiny):
    model, tok, _ = tiny
    local = lm.tiny_backend(model, tok)
    # greedy: identical whatever the batching (the server gets one conversation per request)
    cfg = lm.SampleConfig(methods=["direct", "sequence", "vs_standard"], n=10, temperature=0.0, top_p=1.0,
                          max_new_tokens=30, seed=42)
    a = lm.sample_methods(local, world, cfg)
    conv = [P.messages("vs_standard", f"Tell me a joke about {world['topics'][0]}")]
    kw = dict(max_new_tokens=30, temperature=1.0, n=4, seed=9)
    with LLMServer(local, model_name="tiny") as srv:
        remote = OpenAIBackend(srv.base_url, "tiny", concurrency=3, max_retries=0)
        b = lm.sample_methods(remote, world, cfg)
        lp_remote = lm.pool_logprobs(remote, world)
        sampled = remote.chat(conv, **kw)
    assert [r["samples"] for r in a] == [r["samples"] for r in b]
    # seeded sampling of one conversation: the same on both sides
    assert sampled == local.chat(conv, **kw) and len(set(sampled[0])) > 1
    assert len(a) == 3 * len(cfg.methods)
    assert all(len(r["samples"]) <= 10 for r in a)
    lp_local = lm.pool_logprobs(local, world)
    for t in world["topics"]:
        assert lp_remote[t] == pytest.approx(lp_local[t], abs=1e-4)
    # gamma of a model against itself is exactly 1
    assert lm.fitted_gamma(lp_local, lp_local, world) == pytest.approx(1.0, abs=1e-9)


def test_fitted_gamma_recovers_planted_power(world):
    base = {t: list(np.log(world["p_ref"][t])) for t in world["topics"]}
    sharp = {t: list(2.2 * np.array(base[t]) + 0.5 * np.array(world["r_true"][t]) + 3.0)
             for t in world["topics"]}
    assert lm.fitted_gamma(sharp, base, world) == pytest.approx(2.2, abs=1e-9)


def test_c5_sim_sweep_coverage_increases_and_beats_iid(world):
    cfg = AnalysisConfig(sim_repeats=30, sim_n=30, sim_thresholds=[-1, 0.2, 0.1, 0.07], bootstrap=2000,
                         embed=False, seed=0)
    sweep = sim_threshold_sweep(world, cfg)
    cov = [s["coverage"] for s in sweep]
    assert all(b > a for a, b in zip(cov, cov[1:]))
    exp = [s["expected_coverage_iid"] for s in sweep]
    assert all(b > a for a, b in zip(exp, exp[1:]))
    # lists are drawn without replacement, so coverage is at least the iid expectation
    for s in sweep:
        assert s["coverage"] > s["expected_coverage_iid"] - 3 * s["coverage_se"]


def test_bad_config_is_one_line_error_naming_key(tmp_path):
    cfg = json.dumps({"n_topics": 10, "pool_size": 20, "zipf_s": 1.1, "k": 5, "alpha": 0.6,
                      "n_pref_prompts": 10, "responses_per_prompt": 4, "seed": 0, "pool_sise": 3})
    out = subprocess.run([sys.executable, "-m", "methods.verbalized_sampling", "synth", "--config",
                          cfg, "--out", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if "error" in l]
    assert len(lines) == 1 and "pool_sise" in lines[0]
    bad = cfg.replace('"n_topics": 10', '"n_topics": 99').replace(', "pool_sise": 3', "")
    out = subprocess.run([sys.executable, "-m", "methods.verbalized_sampling", "synth", "--config",
                          bad, "--out", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "n_topics" in out.stderr.strip().splitlines()[-1]
