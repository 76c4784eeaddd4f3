"""Paper-scale path (methods/pid/hub.py) on a tiny random Qwen2.5-VL stand-in: the forward we run
(image features handed in as `mm_encoder_outputs`, embeddings as `inputs_embeds`) equals
transformers' own forward from pixel values; calibrated masking replaces exactly the text span or
the image features; the masking statistics, decisions and BATCH features match direct
computations; the benchmark records are normalised as lmms-eval prompts them; bad paper-scale
input fails with one line and leaves no output."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from methods.core import cli, runtime
from methods.core.results import InputError
from methods.pid import hub
from methods.pid.__main__ import build_parser
from tests.paper_path.standins import _problem, corpus_text, write_dataset, write_model

TOL = 1e-5


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    out = tmp_path_factory.mktemp("pid_hub")
    rng = random.Random(0)
    texts = [corpus_text(rng, 8) for _ in range(100)] + ["".join(_problem(rng)) for _ in range(100)]
    write_model("qwen2_5_vl", out / "vl", texts)
    write_model("qwen2", out / "lm", texts)
    for kind in ("mmbench", "mmstar", "pope"):
        write_dataset(kind, out / kind)
    return out


@pytest.fixture(scope="module")
def vm(standin):
    runtime.activate(None)
    return hub.VLModel(str(standin / "vl"))


@pytest.fixture(scope="module")
def items(standin):
    spec = type("B", (), {"name": "mmbench_en_dev", "dataset": str(standin / "mmbench"), "subset": "en", "split": "dev"})
    return hub.load_benchmark(spec, 3, 4, 5, seed=0)


def _ref_logits(vm, enc, **kw):
    with torch.no_grad():
        return vm.model(input_ids=enc["input_ids"], **enc["image"], **kw).logits[0, -1].float()


def test_forward_equals_transformers_pixel_path(vm, items):
    enc = vm.encode(items["test"][0])
    emb, img = vm.parts(enc)
    ours = vm.logits(enc, emb, img)
    assert torch.allclose(ours, _ref_logits(vm, enc), atol=TOL)
    # the image placeholder is expanded to grid_t * grid_h * grid_w / merge^2 tokens
    n = int(enc["image"]["image_grid_thw"].prod()) // 4
    assert int((enc["input_ids"] == vm.image_token_id).sum()) == n == len(vm.image_feats(img))
    # the span is the item's text, followed by the fixed instruction
    span = vm.tok.decode(enc["input_ids"][0, enc["span"]])
    assert span == items["test"][0]["text"]


def test_text_mask_replaces_exactly_the_span(vm, items):
    enc = vm.encode(items["test"][1])
    emb, img = vm.parts(enc)
    c = torch.linspace(-1, 1, emb.shape[-1])
    stats = {"txt": (c, torch.zeros_like(c)), "img": (c, torch.zeros_like(c))}
    ours = vm.logits(enc, emb, img, "txt", stats)
    ref_emb = emb.clone()
    ref_emb[0, enc["span"]] = c
    assert torch.allclose(ours, _ref_logits(vm, enc, inputs_embeds=ref_emb), atol=TOL)
    assert not torch.allclose(ours, vm.logits(enc, emb, img), atol=1e-4)


def test_image_mask_replaces_the_image_features(vm, items, monkeypatch):
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    enc = vm.encode(items["test"][2])
    emb, img = vm.parts(enc)
    c = torch.linspace(-2, 2, emb.shape[-1])
    stats = {"txt": (c, torch.zeros_like(c)), "img": (c, torch.zeros_like(c))}
    ours = vm.logits(enc, emb, img, "img", stats)
    n = len(vm.image_feats(img))
    inner = vm.model.model
    monkeypatch.setattr(inner, "get_image_features", lambda *a, **k: BaseModelOutputWithPooling(
        pooler_output=(c.expand(n, -1).clone(),)))
    assert torch.allclose(ours, _ref_logits(vm, enc), atol=TOL)
    # calibrated draws: N(mu, sigma^2) per dimension, a fixed seed reproduces them
    sd = torch.full_like(c, 0.5)
    stats["img"] = (c, sd)
    a, b = (vm.logits(enc, emb, img, "img", stats, seed=7) for _ in range(2))
    assert torch.equal(a, b)


def test_profile_stats_and_decisions_match_direct_computation(vm, items):
    prof, test = items["profile"], items["test"]
    stats = hub.profile_stats(vm, prof)
    txt, im = [], []
    for it in prof:
        enc = vm.encode(it)
        with torch.no_grad():
            txt.append(vm.model.get_input_embeddings()(enc["input_ids"])[0, enc["span"]])
            im.append(torch.cat(vm.model.get_image_features(**enc["image"]).pooler_output))
    t, v = torch.cat(txt), torch.cat(im)
    for key, x in (("txt", t), ("img", v)):
        assert torch.allclose(stats[key][0], x.mean(0), atol=TOL) and torch.allclose(stats[key][1], x.std(0), atol=TOL)
    d = hub.decisions(vm, stats, test, seed=0)
    for key in ("p_full", "p_1", "p_2"):
        assert np.allclose(d[key].sum(1), 1.0, atol=1e-5)
    for i, it in enumerate(test):
        enc = vm.encode(it)
        cid = vm.cand_ids(it["cands"])
        ref = torch.softmax(_ref_logits(vm, enc)[cid], -1).numpy()
        assert np.allclose(d["p_full"][i, :len(cid)], ref, atol=TOL)
        assert np.all(d["p_full"][i, len(cid):] == 0)
        with torch.no_grad():
            f1 = torch.cat(vm.model.get_image_features(**enc["image"]).pooler_output).mean(0).numpy()
        assert np.allclose(d["f_1"][i], f1, atol=TOL)
    assert list(d["y"]) == [it["y"] for it in test]


def test_normalise_follows_the_lmms_eval_prompts():
    from PIL import Image

    img = Image.new("RGB", (28, 28), (1, 2, 3))
    r = hub.normalise("mmbench_en_dev", {"question": "Q?", "hint": "H.", "A": "x", "B": "y", "C": "z", "D": None,
                                         "answer": "C", "image": img}, "t")
    assert r["text"] == "H.\nQ?\nA. x\nB. y\nC. z\n" and r["cands"] == ["A", "B", "C"] and r["y"] == 2
    assert r["post"] == hub.MC_POST
    r = hub.normalise("mmbench_en_dev", {"question": "Q?", "hint": "nan", "A": "x", "B": "y", "answer": "B",
                                         "image": img}, "t")
    assert r["text"] == "Q?\nA. x\nB. y\n" and r["y"] == 1
    r = hub.normalise("pope", {"question": "Is there a dog?", "answer": "no", "image": img}, "t")
    assert r["text"] == "Is there a dog?\n" and r["cands"] == ["Yes", "No"] and r["y"] == 1
    assert r["post"] == hub.POPE_POST
    r = hub.normalise("mmstar", {"question": "Q?\nOptions: A: a, B: b, C: c, D: d", "answer": "D", "image": img}, "t")
    assert r["text"] == "Q?\nOptions: A: a, B: b, C: c, D: d\n" and r["y"] == 3
    assert Image.open(__import__("io").BytesIO(r["png"])).size == (28, 28)
    with pytest.raises(InputError, match="not one of the options"):
        hub.normalise("mmstar", {"question": "Q", "answer": "E", "image": img}, "t")
    with pytest.raises(InputError, match="no field 'image'"):
        hub.normalise("pope", {"question": "Q", "answer": "yes"}, "t")
    with pytest.raises(InputError, match="cannot be decoded"):
        hub.normalise("pope", {"question": "Q", "answer": "yes", "image": {"bytes": b"not a png", "path": None}}, "t")


def test_pack_roundtrip(items):
    its = items["test"]
    assert hub.unpack(hub.pack(its)) == its


def test_lora_adapts_only_the_last_fifth_of_the_layers(standin):
    from peft import LoraConfig, get_peft_model  # noqa: F401  (the step's dependency)

    runtime.activate(None)
    rc = type("RC", (), {"steps": 1, "batch_size": 2, "lr": 1e-3})
    its = hub.load_benchmark(type("B", (), {"name": "pope", "dataset": str(standin / "pope"), "subset": None,
                                            "split": "test"}), 1, 2, 1, seed=0)["train"]
    vm = hub.lora_finetune(str(standin / "vl"), its, np.ones(len(its)), rc, seed=0)
    names = [n for n, p in vm.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n and ".layers.1." in n and "visual" not in n for n in names)
    assert {n.split(".")[-4] for n in names} == {"q_proj", "k_proj", "v_proj", "o_proj"}
    # lora_B starts at zero; one weighted step moved it
    assert all(float(p.abs().max()) > 0 for n, p in vm.model.named_parameters() if "lora_B" in n)


def _data_cfg(standin, benchmarks, models=None):
    return {"n_train": 3, "n_profile": 2, "n_test": 3, "n_av_train": 10, "n_av_test": 10, "vision_only_frac": 0.9,
            "seed": 0, "hub": {"vl_models": models or [str(standin / "vl")], "benchmarks": benchmarks,
                               "lora_base": str(standin / "vl")}}


def _run(capsys, *argv):
    rc = cli.main(build_parser(), list(argv))
    return rc, capsys.readouterr().err.strip().splitlines()


def test_data_step_missing_split_fails_with_one_line(standin, tmp_path, capsys):
    bad = [{"name": "mmstar", "dataset": str(standin / "mmstar"), "subset": None, "split": "test"}]
    out = tmp_path / "data.npz"
    rc, err = _run(capsys, "data", "--config", json.dumps(_data_cfg(standin, bad)), "--out", str(out))
    assert rc == 2 and len(err) == 1 and "no split 'test'" in err[0] and "mmstar" in err[0]
    assert not out.exists()


def test_decide_with_a_text_only_model_fails_with_one_line(standin, tmp_path, capsys):
    good = [{"name": "pope", "dataset": str(standin / "pope"), "subset": None, "split": "test"}]
    data = tmp_path / "data.npz"
    rc, err = _run(capsys, "data", "--config", json.dumps(_data_cfg(standin, good)), "--out", str(data))
    assert rc == 0 and data.exists()
    cfg = _data_cfg(standin, good, models=[str(standin / "lm")])
    dec, inter = tmp_path / "decisions.npz", tmp_path / "interventions.json"
    rc, err = _run(capsys, "decide", "--config", json.dumps({"data": {k: v for k, v in cfg.items() if k != "hub"},
                                                             "hub": cfg["hub"]}),
                   "--data", str(data), "--out", str(dec), "--interventions", str(inter))
    assert rc == 2 and len(err) == 1 and "cannot load multimodal model" in err[0] and "lm" in err[0]
    assert not dec.exists() and not inter.exists()


def test_paper_summary_takes_the_weakest_benchmark(tmp_path):
    """C2 at paper scale: Spearman ρ across the models per benchmark (scipy), the metric the
    smallest ρ(S, Δ) / the largest ρ(U_txt, Δ); C4 the mean paired PID − uniform difference."""
    from scipy.stats import spearmanr

    from methods.core.results import read_json
    from methods.pid.analysis import summarize_hub
    from methods.pid.config import AnalysisConfig

    rng = np.random.default_rng(0)
    pid, inter = {}, []
    for b in ("mmstar", "pope"):
        for i in range(6):
            name = f"m{i}__{b}"
            s, u, dv = rng.random(3)
            pid[name] = {"pooled": {"R": 0.1, "U_vis": 0.2, "U_txt": float(u), "S": float(s), "I": 1.0}}
            inter.append({"config": name, "mix": f"m{i}", "checkpoint": b, "model": f"org/m{i}", "benchmark": b,
                          "acc": 0.5, "acc_no_vision": 0.5 - dv, "delta_vision": float(dv)})
    runs = {"uniform": [{"seed": k, "syn_acc": 0.5 + 0.01 * k} for k in range(3)],
            "pid": [{"seed": k, "syn_acc": 0.52 + 0.01 * k} for k in range(3)],
            "random": [{"seed": k, "syn_acc": 0.5} for k in range(3)]}
    rew = {"runs": runs, "gap_family_counts": {"mmstar": 2, "pope": 1}, "n_gap": 3, "base_syn_acc": 0.5,
           "lora_base": "org/m1"}
    out = tmp_path / "s.json"
    summarize_hub(AnalysisConfig(profile_config="m1", min_configs=5), pid, inter, rew, out, tmp_path / "t.md",
                  tmp_path / "p.png", tmp_path / "q.png")
    m = read_json(out)
    rho = {b: (spearmanr([pid[r["config"]]["pooled"]["S"] for r in inter if r["benchmark"] == b],
                         [r["delta_vision"] for r in inter if r["benchmark"] == b]).statistic,
               spearmanr([pid[r["config"]]["pooled"]["U_txt"] for r in inter if r["benchmark"] == b],
                         [r["delta_vision"] for r in inter if r["benchmark"] == b]).statistic) for b in ("mmstar", "pope")}
    assert m["c2_rho_s_delta"] == pytest.approx(min(r[0] for r in rho.values()), abs=1e-12)
    assert m["c2_rho_utxt_delta"] == pytest.approx(max(r[1] for r in rho.values()), abs=1e-12)
    assert m["c4_syn_acc_gain"] == pytest.approx(0.02, abs=1e-12) and m["c4_gap_syn_items"] == 3
    # C4's replicates are the per-seed paired differences (claims computes the interval over seeds)
    rep = m["replicates"]["c4_syn_acc_gain"]
    assert rep["unit"] == "seed" and rep["ids"] == [0, 1, 2]
    assert rep["values"] == pytest.approx([0.02, 0.02, 0.02], abs=1e-12)
    assert "c4_syn_acc_gain" not in m.get("intervals", {})
    # the claims engine reads it: every seed equal → zero-width, undecided; C2 has one ρ, no seed replicates
    from methods.core.claims import evaluate_claims, load_claims
    rows = {r["id"]: r for r in evaluate_claims(load_claims(Path(__file__).resolve().parents[2] / "methods/pid/claims.yaml"), m, "paper")["claims"]}
    assert rows["C4"]["n"] == 3 and rows["C4"]["verdict"] == "inconclusive"
    assert rows["C2a"]["verdict"] in ("inconclusive", "not_checked") and rows["C2a"]["replicates"] == "seed"
    # fewer models than min_configs: not measured
    summarize_hub(AnalysisConfig(profile_config="m1", min_configs=7), pid, inter, rew, out, tmp_path / "t.md",
                  tmp_path / "p.png", tmp_path / "q.png")
    assert read_json(out)["c2_rho_s_delta"] is None
