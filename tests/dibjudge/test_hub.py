"""The paper-scale path (methods/dibjudge/hub_data.py, hub.py) on the Qwen3 stand-in and the
dataset stand-ins of tests/paper_path/standins.py: the NLL proxy equals transformers' own loss,
the zero-initialised z-prompt injection is a no-op and the score reads the last real token, the
benchmarks are grouped and labelled as documented, and bad input fails as one line with no output."""
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from methods.core.config import from_dict
from methods.core.runtime import reset
from methods.dibjudge.config import DataConfig, Hub, RunConfig
from tests.paper_path.standins import corpus_text, write_dataset, write_model
from tests.workflow.conftest import snakemake_env

ROOT = Path(__file__).resolve().parents[2]
DATA = dict(n_people=8, n_objects=6, n_colours=6, max_count=5, n_train={"EN": 1, "L1": 1, "L2": 1},
            n_synonyms={"L1": 2, "L2": 3}, mt_better_frac=0.8, particle_prob=0.5, n_test=4, len_bins=4,
            nll_bins=6, ttr_bins=5, omit_frac=0.3, swap_frac=0.5, ref_lm_sentences=10, seed=0)
MODEL = dict(d_model=32, n_layers=2, n_heads=4, d_ff=64, d_z=16, max_len=96, vq_codes=8, vq_decay=0.99, vq_beta=0.25)


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    out = tmp_path_factory.mktemp("dibjudge_standins")
    rng = random.Random(0)
    write_model("qwen3", out / "qwen3", [corpus_text(rng, 8) for _ in range(200)])
    for kind in ("m_preference", "mm_eval", "m_rewardbench"):
        write_dataset(kind, out / kind)
    hub = {"judge": str(out / "qwen3"), "encoder": str(out / "qwen3"), "train_data": str(out / "m_preference"),
           "eval_data": [str(out / "mm_eval"), str(out / "m_rewardbench")], "train_pairs": 12,
           "low_resource": ["sw", "te", "bn", "el", "uk"]}
    return out, hub


def _train_cfg(hub, **model):
    return {"model": {**MODEL, **model}, "steps": 2, "batch_size": 3, "lr": 1e-3, "lr_heads": 2e-4, "weight_decay": 0.01,
            "grad_clip": 1.0, "warmup_frac": 0.05, "kl_weight": 1e-4, "vq_weight": 0.01, "lam_comp": 1.0,
            "lam_bias": 0.5, "lam_dis": 1.0, "dis_c": 0.5, "queue": 8, "ema_decay": 0.99, "eval_batch": 8,
            "probe_n": 20, "seeds": [0], "hub": hub}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "methods.dibjudge", *args], cwd=ROOT, env=snakemake_env(),
                          capture_output=True, text=True, timeout=300)


def test_eval_pairs_grouping_and_labels(standins):
    from methods.dibjudge.hub_data import eval_pairs

    out, hub = standins
    rows = eval_pairs(from_dict(Hub, hub, "hub"), n_test=4, seed=0)
    src = {}
    for line in (out / "mm_eval" / "default" / "test.jsonl").read_text().splitlines():
        r = json.loads(line)
        src[(r["prompt"], r["chosen"])] = r
    langs = {r["language"] for r in rows}
    assert "aka_Latn" not in langs                              # MM-Eval Language Resource rows left out
    assert {"ar", "el", "ko", "uk"} <= langs                   # m-rewardbench subsets → ISO 639-1
    assert not any(r["language"] == "translation" for r in rows)
    for r in rows:
        want = "EN" if r["language"] == "en" else "L2" if r["language"] in hub["low_resource"] else "L1"
        assert r["lang"] == want
        chosen = r["ab"[r["label"]]]["text"]
        if r["source"] == "mm_eval":                             # the label points at the chosen response
            assert src[(r["prompt"], chosen)]["rejected"] == r["ab"[1 - r["label"]]]["text"]
    counts = {}
    for r in rows:
        counts[(r["source"], r["lang"])] = counts.get((r["source"], r["lang"]), 0) + 1
    assert max(counts.values()) == 4                            # at most n_test per benchmark and group
    assert 0.2 < sum(r["label"] for r in rows) / len(rows) < 0.8   # the chosen side is drawn at random


def test_judge_nll_matches_transformers_loss(standins):
    from transformers import AutoModelForCausalLM

    from methods.dibjudge.hub_data import JudgeLM, judge_prefix

    out, _ = standins
    reset()
    lm = JudgeLM(str(out / "qwen3"))
    rng = random.Random(1)
    prompts = [corpus_text(rng, 1) for _ in range(5)]
    resps = [corpus_text(rng, rng.randrange(1, 4)) for _ in range(5)]
    got = lm.nll(prompts, resps)
    ref_model = AutoModelForCausalLM.from_pretrained(str(out / "qwen3")).eval()
    for p, r, g in zip(prompts, resps, got):
        pre = judge_prefix(lm.tok, p)
        resp = lm.tok(r, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([pre + resp])
        labels = torch.tensor([[-100] * len(pre) + resp])
        with torch.no_grad():
            want = ref_model(input_ids=ids, labels=labels).loss.item()
        assert abs(g - want) < 1e-5, (g, want)


@pytest.mark.parametrize("variant", ["dib_vib", "dib_vq", "sft"])
def test_zero_injection_is_a_noop_and_score_reads_the_last_token(standins, variant):
    from methods.core.models import load_model
    from methods.dibjudge.hub import HubJudge, load_encoder
    from methods.dibjudge.hub_data import judge_prefix

    out, hub = standins
    reset()
    cfg = from_dict(RunConfig, _train_cfg(hub), "train")
    judge, tok = load_model(hub["judge"], training=True)
    enc = load_encoder(hub["encoder"], cfg)[0] if variant != "sft" else None
    torch.manual_seed(0)
    model = HubJudge(judge, tok, enc, cfg, variant, {"len": 4, "nll": 6, "ttr": 5}).eval()
    rng = random.Random(2)
    rows = [{"prompt": corpus_text(rng, 1), "a": {"text": corpus_text(rng, k + 1)}, "b": {"text": corpus_text(rng, 1)}}
            for k in range(3)]                                   # different lengths: right padding
    with torch.no_grad():
        score = model(model.encode(rows))["score"]
    ref, _ = load_model(hub["judge"])                           # the plain LM (LoRA B starts at 0)
    for i, (k, r) in enumerate([(k, r) for k in "ab" for r in rows]):
        ids = judge_prefix(tok, r["prompt"]) + tok(r[k]["text"], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            h = ref(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0, -1]
            want = model.score(h).item()
        assert abs(score[i].item() - want) < 1e-4, (variant, i, score[i].item(), want)
    if variant != "sft":                                         # a non-zero injection moves the score
        torch.nn.init.normal_(model.zproj.weight, std=1.0)
        with torch.no_grad():
            moved = model(model.encode(rows))["score"]
        assert (moved - score).abs().max() > 1e-3


@pytest.mark.parametrize("case", ["no_test_split", "no_low_resource_pair", "no_chat_template"])
def test_bad_data_input_is_one_line_and_leaves_no_output(standins, tmp_path, case):
    out, hub = standins
    if case == "no_test_split":
        bad = tmp_path / "mm_eval_bad"
        shutil.copytree(out / "mm_eval", bad)
        readme = (bad / "README.md").read_text().replace("split: test", "split: validation")
        (bad / "README.md").write_text(readme)
        hub, want = {**hub, "eval_data": [str(bad)]}, "has no 'test' split"
    elif case == "no_low_resource_pair":
        hub, want = {**hub, "low_resource": ["zu"]}, "no pair in a train.hub.low_resource language"
    else:                                   # a base LM without a chat template as the judge
        bad = tmp_path / "qwen3_base"
        shutil.copytree(out / "qwen3", bad)
        cfg = json.loads((bad / "tokenizer_config.json").read_text())
        cfg.pop("chat_template", None)
        (bad / "tokenizer_config.json").write_text(json.dumps(cfg))
        for f in bad.glob("chat_template.j*"):
            f.unlink()
        hub, want = {**hub, "judge": str(bad)}, "no chat template"
    target = tmp_path / "data"
    p = _cli("data", "--config", json.dumps(DATA), "--hub", json.dumps(hub),
             "--out", str(target), "--runtime", '{"device": "cpu"}')
    assert p.returncode == 2
    err = [l for l in p.stderr.splitlines() if "error" in l]
    assert len(err) == 1 and want in err[0], p.stderr[-2000:]
    assert not target.exists() and not any(tmp_path.glob(".data.*"))


def test_encoder_shape_mismatch_is_one_line_and_leaves_no_output(standins, tmp_path):
    from methods.dibjudge.hub_data import build

    out, hub = standins
    reset()
    data = tmp_path / "data"
    build(from_dict(DataConfig, DATA, "data"), from_dict(Hub, hub, "hub"), data)
    assert {p.name for p in data.iterdir()} == {"train.jsonl", "id.jsonl", "bias.jsonl", "adv.jsonl", "meta.json"}
    target = tmp_path / "metrics_dib_vib.json"
    p = _cli("train", "--config", json.dumps(_train_cfg(hub, d_model=64)), "--variant", "dib_vib", "--data", str(data),
             "--ckpt", str(tmp_path / "ckpt"), "--out", str(target), "--runtime", '{"device": "cpu"}')
    assert p.returncode == 2
    err = [l for l in p.stderr.splitlines() if "error" in l]
    assert len(err) == 1 and "train.model.d_model" in err[0] and "hidden_size 32" in err[0], p.stderr[-2000:]
    assert not target.exists()
