"""rl_sgd's hub path (methods/rl_sgd/hub.py) on the stand-ins of tests/paper_path/standins.py: the
verified-answer reward, sampling by `core.rl.generate` against a hand-written greedy loop, the
micro-batched GRPO update against the whole-batch one and the on-policy loss against its closed
form, the steps end to end with `save_pretrained` checkpoints that `AutoModelForCausalLM` loads,
and bad hub input failing in one line with no output left."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch

from methods.core.config import from_dict
from methods.rl_sgd import hub
from methods.rl_sgd.config import GRPOConfig
from tests.paper_path import standins
from tests.workflow.conftest import ROOT, snakemake_env

GRPO = {"steps": 2, "n_prompts": 2, "group_size": 4, "temperature": 1.0, "max_new": 6, "adv_eps": 1e-6,
        "skip_zero_var": False, "loss_norm": "token", "clip_lo": 0.2, "clip_hi": 0.28, "beta": 0.0,
        "betas": [0.9, 0.999], "weight_decay": 0.01, "momentum": 0.9, "log_every": 1}
EVAL = {"max_new": 6, "batch_size": 8, "lm_eval_batch_size": 4, "lm_eval_limit": 2}


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    """A Qwen2 and a Llama-3 stand-in model, and the DeepScaleR / MATH-500 stand-in datasets."""
    out = tmp_path_factory.mktemp("rl_sgd_hub")
    import random

    rng = random.Random(0)
    texts = [standins.corpus_text(rng, 8) for _ in range(100)] + ["".join(standins._problem(rng)) for _ in range(100)]
    for fam in ("qwen2", "llama"):
        standins.write_model(fam, out / fam, texts)
    for kind in ("deepscaler", "math500"):
        standins.write_dataset(kind, out / kind)
    return out


def test_last_boxed_and_verified_reward():
    assert hub.last_boxed(r"so \boxed{1} then \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
    assert hub.last_boxed(r"\boxed{a{b}c}") == "a{b}c"
    assert hub.last_boxed(r"\boxed{open") is None and hub.last_boxed("no box 12") is None
    assert hub.reward(r"The answer is $\boxed{0.5}$.", r"\frac{1}{2}") == 1.0   # equal values, other forms
    assert hub.reward(r"\boxed{ 28 }", "28") == 1.0
    assert hub.reward(r"\boxed{27}", "28") == 0.0
    assert hub.reward("the answer is 28", "28") == 0.0                          # no boxed final answer


def test_generate_greedy_matches_a_manual_argmax_loop(stand):
    """`core.rl.generate` (left-padded batched HF generate, KV cache) gives the tokens of a plain
    one-prompt-at-a-time argmax loop without cache, cut after the first stop id."""
    from methods.core import rl

    model, tok = hub.load(str(stand / "qwen2"), training=False, dtype=torch.float64)
    prompts = [hub.prompt_ids(tok, p) for p in ("What is 2+3?", "Compute $(12+30) \\times 4$, please.")]
    assert len(prompts[0]) != len(prompts[1])
    stops, pad = hub.stop_ids(model, tok)
    got = rl.generate(model, prompts, 7, eos_ids=stops, pad_id=pad, greedy=True, chunk=2)
    for p, g in zip(prompts, got):
        ids, ref = torch.tensor([p]), []
        for _ in range(7):
            nxt = int(model(ids).logits[0, -1].argmax())
            ref.append(nxt)
            if nxt in stops:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
        assert g == ref


@pytest.mark.parametrize("norm", ["token", "seq"])
def test_micro_batched_update_is_the_whole_batch_update(stand, norm):
    """Accumulating `micro_batch` sequences at a time gives the whole-batch SGD update (fp64, 1e-10),
    and the on-policy loss equals its closed form −Σ_i Â_i·n_i / Σ_i n_i (token) or −mean_i Â_i (seq)."""
    from methods.core import rl
    from methods.rl_sgd import optim

    base, tok = hub.load(str(stand / "llama"), training=True, dtype=torch.float64)
    prompts = [hub.prompt_ids(tok, f"What is {a}+{a}?") for a in (3, 3, 3, 3, 14, 14, 14, 14)]
    g = torch.Generator().manual_seed(0)
    comps = [torch.randint(5, 200, (int(n),), generator=g).tolist() for n in (1, 3, 5, 2, 4, 4, 1, 6)]
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    deltas, losses = [], []
    for mb in (None, 3):
        model = copy.deepcopy(base)
        cfg = from_dict(GRPOConfig, {**GRPO, "loss_norm": norm, "micro_batch": mb}, "grpo")
        before = {k: v.clone() for k, v in model.state_dict().items()}
        loss, stats = hub.grpo_step(model, optim.make("sgd", model.parameters(), 0.5), prompts, comps,
                                    rewards, cfg, tok.pad_token_id or 0)
        deltas.append({k: model.state_dict()[k] - before[k] for k in before})
        losses.append(loss)
    for k in deltas[0]:
        torch.testing.assert_close(deltas[1][k], deltas[0][k], rtol=1e-10, atol=1e-12)
    assert any(d.abs().max() > 0 for d in deltas[0].values())
    adv = rl.group_advantages(rewards, 4, GRPO["adv_eps"])
    n = torch.tensor([len(c) for c in comps], dtype=torch.float64)
    closed = -(adv * n).sum() / n.sum() if norm == "token" else -adv.mean()
    assert losses[0] == pytest.approx(float(closed), abs=1e-12)
    assert losses[1] == pytest.approx(float(closed), abs=1e-12)


def test_steps_end_to_end_with_save_pretrained_checkpoints(stand, tmp_path):
    """prompts → base → GRPO (AdamW) → SFT on the stand-ins; the base (bf16) and the run (fp32
    master weights) are `save_pretrained` directories that `AutoModelForCausalLM` loads with the
    weights the sparsity step reads; the run changed every fp32 entry it stepped and its AdamW state
    is 8 bytes per parameter."""
    from transformers import AutoModelForCausalLM

    from methods.core.runtime import reset
    from methods.rl_sgd import model as M
    from methods.rl_sgd.sparsity import analyse

    reset()
    data = tmp_path / "data"
    counts = hub.prompts(from_dict(hub.PromptsStep, {"data": {"n_train": 20, "n_eval": 4, "seed": 0},
                                                     "rl_dataset": str(stand / "deepscaler"),
                                                     "eval_datasets": [str(stand / "math500")]}, "p"), str(data))
    assert counts == {"rl_prompts": 20, "sft_train": 20, "eval_0": 4}
    rec = json.loads((data / "eval_0.jsonl").read_text().splitlines()[0])
    assert set(rec) == {"problem", "answer"}
    base = tmp_path / "base" / "m0"
    meta = hub.base(from_dict(hub.BaseStep, {"hub_id": str(stand / "qwen2"), "key": "m0", "eval": EVAL}, "b"),
                    str(data), str(base))
    assert meta["width"] == "m0" and meta["hidden_size"] == 32 and 0.0 <= meta["base_acc"] <= 1.0
    run = tmp_path / "runs" / "m0_adamw_lr0.001_s0"
    cfg = from_dict(hub.GRPOStep, {"grpo": {**GRPO, "micro_batch": 3}, "eval": EVAL}, "g")
    s = hub.grpo_run(cfg, "adamw", 1e-3, 0, str(base), str(data), str(run), {})
    assert s["state_bytes"] == 8 * s["n_params"]
    for d, dtype in ((base, torch.bfloat16), (run, torch.float32)):
        m = AutoModelForCausalLM.from_pretrained(str(d))
        assert type(m).__name__ == "Qwen2ForCausalLM" and m.dtype == dtype
        sd = M.state_dict_of(d)
        for k, v in m.state_dict().items():
            if k in sd:
                assert torch.equal(v, sd[k]), k
    res = analyse(M.state_dict_of(base), M.state_dict_of(run), with_rank=False)
    assert res["fp32_changed"] > 0.99 and set(res["per_category"]) == {"embedding", "attention", "mlp", "norm", "head"}
    log = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 1] and all(0 <= r["reward"] <= 1 for r in log)
    sft = hub.sft_contrast(from_dict(hub.SFTStep, {
        "sft": {"steps": 2, "batch_size": 2, "lrs": {"adamw": 1e-3, "adam_nomom": 1e-3, "adam_noadapt": 0.1,
                                                     "sgd": 0.1, "sgd_mom": 0.01}},
        "seeds": [0], "eval": EVAL, "max_len": 16, "micro_batch": 1}, "s"), str(base), str(data))
    assert set(sft["seeds"]["0"]) == {"adamw", "adam_nomom", "adam_noadapt", "sgd", "sgd_mom"}
    assert all(v["final_loss"] > 0 for v in sft["seeds"]["0"].values())


def _cli(*args):
    env = {**snakemake_env(), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "methods.rl_sgd", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_rl_dataset_without_answers_is_one_line_and_no_output(stand, tmp_path):
    """A hub-layout RL dataset whose rows have neither `answer` nor `solution` (a wrong dataset)."""
    bad = tmp_path / "bad_rl"
    (bad / "default").mkdir(parents=True)
    (bad / "default" / "train.jsonl").write_text("".join(json.dumps({"problem": f"p{i}", "hint": "x"}) + "\n"
                                                        for i in range(5)))
    (bad / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                   "    path: default/train.jsonl\n---\n")
    cfg = {"hub_path": {"data": {"n_train": None, "n_eval": 4, "seed": 0}, "rl_dataset": str(bad),
                        "eval_datasets": [str(stand / "math500")]}}
    out = tmp_path / "data"
    p = _cli("prompts", "--config", json.dumps(cfg), "--out", str(out))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "neither an 'answer' nor a 'solution' field" in lines[0] and str(bad) in lines[0]
    assert not out.exists()


def test_base_that_is_not_a_model_directory_is_one_line_and_no_output(stand, tmp_path):
    """warmstart on a hub id that is a directory without config.json (e.g. a dataset path)."""
    data = tmp_path / "data"
    hub.prompts(from_dict(hub.PromptsStep, {"data": {"n_train": 5, "n_eval": 2, "seed": 0},
                                            "rl_dataset": str(stand / "deepscaler"),
                                            "eval_datasets": [str(stand / "math500")]}, "p"), str(data))
    cfg = {"hub_path": {"hub_id": str(stand / "math500"), "key": "m0", "eval": EVAL}}
    out = tmp_path / "base" / "m0"
    p = _cli("warmstart", "--config", json.dumps(cfg), "--base_key", "m0", "--data", str(data), "--out", str(out))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "not a model directory (no config.json)" in lines[0]
    assert not out.exists()
