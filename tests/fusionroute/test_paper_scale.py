"""FusionRoute's paper-scale code on local stand-ins (tests/paper_path/standins.py): the shared-vocabulary
check, bad hub input as one-line errors with no output left, the lm-eval model against a direct
re-implementation of fused greedy decoding with transformers, and the paper-scale claim metrics
against their closed forms."""
from __future__ import annotations

import json
import random

import pytest

from methods.core import cli
from methods.fusionroute.__main__ import build_parser
from tests.paper_path import standins as S

DATA_CFG = {"n_train": 6, "n_test": 4, "add_digits": 2, "rev_min": 3, "rev_max": 6, "brk_min": 3, "brk_max": 6,
            "home_frac": 0.9, "seed": 0}
TRAIN = {"steps": 1, "batch_size": 2, "lr": 1.0e-5, "optimizer": "adamw", "betas": [0.9, 0.95], "eps": 1.0e-8,
         "warmup_steps": 0, "schedule": "cosine", "min_lr_ratio": 0.1, "grad_clip": 1.0, "decay_min_ndim": 2,
         "eval_every": 0, "ckpt_every": 0, "log_every": 1}
ROUTER_CFG = {"train": TRAIN, "lambda_route": 1.0, "informative_only": True, "n_train": 4, "init_seed": 1,
              "max_len": 64}


def _texts():
    rng = random.Random(0)
    return [S.corpus_text(rng, 8) for _ in range(60)] + ["".join(S._problem(rng)) for _ in range(60)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two Llama-3 stand-ins with one tokenizer and different weights, and a Qwen2 stand-in."""
    out = tmp_path_factory.mktemp("fr_models")
    texts = _texts()
    tok = S.build_tokenizer("llama", texts)
    paths = {}
    for name, seed in (("llama_a", 0), ("llama_b", 1)):
        m = S.build_model("llama", tok, seed=seed)
        m.save_pretrained(out / name, safe_serialization=True)
        tok.save_pretrained(out / name)
        paths[name] = out / name
    S.write_model("qwen2", out / "qwen2", texts)
    paths["qwen2"] = out / "qwen2"
    return paths


def _pointers(tmp_path, experts: dict) -> list[str]:
    dirs = []
    for dom, path in experts.items():
        d = tmp_path / "experts" / dom
        d.mkdir(parents=True)
        (d / "expert.json").write_text(json.dumps({"domain": dom, "hub": str(path)}))
        dirs.append(str(d))
    return dirs


def _hub(router, experts, datasets=()):
    return {"router_base": str(router), "experts": {k: str(v) for k, v in experts.items()},
            "datasets": list(datasets), "lm_eval_tasks": ["gsm8k"]}


def _one_line_error(capsys, argv, step):
    assert cli.main(build_parser(), argv) == 2
    err = capsys.readouterr().err.strip().splitlines()   # (progress bars of model loading before it)
    errors = [line for line in err if "error" in line.lower()]
    assert len(errors) == 1 and err[-1] == errors[0] and err[-1].startswith(f"fusionroute {step}: error: "), err
    return err[-1]


def test_sft_refuses_an_expert_with_another_vocabulary(models, tmp_path, capsys):
    experts = {"add": models["llama_a"], "rev": models["qwen2"], "brk": models["llama_b"]}
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text(json.dumps({"domain": "add", "prompt": "What is 2+2?", "answer": "4"}) + "\n")
    out = tmp_path / "router_sft"
    cfg = {**ROUTER_CFG, "hub": _hub(models["llama_a"], experts)}
    err = _one_line_error(capsys, ["sft", "--config", json.dumps(cfg), "--seed", "0", "--data", str(data),
                                   "--experts", *_pointers(tmp_path, experts), "--out", str(out)], "sft")
    assert "expert rev" in err and "does not share the tokenizer vocabulary" in err
    assert not out.exists() and not list(tmp_path.glob("router_sft*"))


def test_shared_vocab_ignores_renamed_special_tokens_only(models):
    """Llama-3 and Llama-3.1 name some reserved special tokens differently: the check compares the
    regular vocabulary (and the logit width), so a renamed added token passes, a changed regular
    token does not."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from methods.core.results import InputError
    from methods.fusionroute.experts import base_vocab, check_shared_vocab

    tok = AutoTokenizer.from_pretrained(models["llama_a"])
    m = AutoModelForCausalLM.from_pretrained(models["llama_a"])
    tok2 = AutoTokenizer.from_pretrained(models["llama_a"])
    tok2.add_special_tokens({"additional_special_tokens": ["<|python_tag|>"]})
    assert base_vocab(tok2) == base_vocab(tok)
    check_shared_vocab([("router", tok, m), ("expert", tok2, m)])
    q = AutoTokenizer.from_pretrained(models["qwen2"])
    qm = AutoModelForCausalLM.from_pretrained(models["qwen2"])
    with pytest.raises(InputError, match="does not share the tokenizer vocabulary"):
        check_shared_vocab([("router", tok, m), ("expert", q, qm)])


def test_data_refuses_a_missing_split(tmp_path, capsys):
    S.write_dataset("openmathinstruct2", tmp_path / "omi")
    S.write_dataset("ultrafeedback_binarized", tmp_path / "uf")
    datasets = [{"id": str(tmp_path / "omi"), "subset": None, "split": "train_9M", "role": "add"},
                {"id": str(tmp_path / "uf"), "subset": None, "split": "train_prefs", "role": "prefs"}]
    cfg = {**DATA_CFG, "hub": _hub("r", {"add": "a", "rev": "b", "brk": "c"}, datasets)}
    out = tmp_path / "data"
    err = _one_line_error(capsys, ["data", "--config", json.dumps(cfg), "--out", str(out)], "data")
    assert "has no split 'train_9M'" in err and "train_1M" in err
    assert not out.exists()


def test_data_refuses_a_dataset_of_no_known_format(tmp_path, capsys):
    S.write_dataset("aime25", tmp_path / "aime")      # problem / answer / id: no SFT format
    S.write_dataset("ultrafeedback_binarized", tmp_path / "uf")
    datasets = [{"id": str(tmp_path / "aime"), "subset": None, "split": "test", "role": "add"},
                {"id": str(tmp_path / "uf"), "subset": None, "split": "train_prefs", "role": "prefs"}]
    cfg = {**DATA_CFG, "hub": _hub("r", {"add": "a", "rev": "b", "brk": "c"}, datasets)}
    out = tmp_path / "data"
    err = _one_line_error(capsys, ["data", "--config", json.dumps(cfg), "--out", str(out)], "data")
    assert "match no SFT format" in err
    assert not out.exists()


def test_data_reads_the_real_fields(tmp_path):
    """gsm8k (subset main) and ultrafeedback_binarized (train_sft: the assistant turn of `messages`)."""
    from methods.core.config import from_dict
    from methods.core.results import read_jsonl
    from methods.fusionroute.config import DataConfig, Hub
    from methods.fusionroute.data import build_hub

    S.write_dataset("gsm8k", tmp_path / "gsm8k")
    S.write_dataset("ultrafeedback_binarized", tmp_path / "uf")
    hub = from_dict(Hub, _hub("r", {"add": "a", "rev": "b", "brk": "c"}, [
        {"id": str(tmp_path / "gsm8k"), "subset": "main", "split": "train", "role": "add"},
        {"id": str(tmp_path / "uf"), "subset": None, "split": "train_sft", "role": "rev"},
        {"id": str(tmp_path / "uf"), "subset": None, "split": "train_prefs", "role": "prefs"}]), "hub")
    build_hub(from_dict(DataConfig, DATA_CFG), hub, tmp_path / "data")
    rows = read_jsonl(tmp_path / "data" / "train.jsonl")
    assert [r["domain"] for r in rows] == ["add"] * 6 + ["rev"] * 6
    gsm = {json.dumps(r, sort_keys=True) for r in read_jsonl(tmp_path / "gsm8k" / "main" / "train.jsonl")}
    for r in rows[:6]:
        assert json.dumps({"question": r["prompt"], "answer": r["answer"]}, sort_keys=True) in gsm
    uf = {r["prompt"]: r["messages"][-1]["content"] for r in read_jsonl(tmp_path / "uf" / "default" / "train_sft.jsonl")}
    assert all(uf[r["prompt"]] == r["answer"] for r in rows[6:])


def test_lm_eval_model_is_fused_greedy_decoding(models):
    """FusionRouteLM.generate_until against a direct loop with transformers: at every step the
    router's routing head picks an expert (argmax W h), the next token is argmax(log softmax of
    the router's logits + log softmax of that expert's), the reply stops at eos or `until`."""
    import torch
    import torch.nn.functional as F
    from lm_eval.api.instance import Instance
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from methods.fusionroute.decode import make_step
    from methods.fusionroute.lm import FusionRouteLM
    from methods.fusionroute.router import router_module

    tok = AutoTokenizer.from_pretrained(models["llama_a"])
    router_lm = AutoModelForCausalLM.from_pretrained(models["llama_a"]).eval()
    experts = [AutoModelForCausalLM.from_pretrained(models[k]).eval() for k in ("llama_b", "llama_a", "llama_b")]
    torch.manual_seed(3)
    router = router_module(router_lm, 3).eval()
    with torch.no_grad():
        router.head.weight.normal_(0, 1.0)       # a head that actually switches experts
    stops = [tok.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|eot_id|>")]
    lm = FusionRouteLM(make_step("fusionroute", router, experts), tok, stops, batch_size=2)
    contexts = ["What is $(3+4) \\times 2$?", "First", "The answer is"]
    reqs = [Instance("generate_until", {}, (c, {"until": ["\n\n"], "max_gen_toks": 7}), i)
            for i, c in enumerate(contexts)]
    got = lm.generate_until(reqs)

    def reference(text):
        ids = tok(text)["input_ids"]
        out = []
        with torch.no_grad():
            for _ in range(7):
                x = torch.tensor([ids + out])
                o = router_lm(input_ids=x, output_hidden_states=True)
                choice = int((o.hidden_states[-1][0, -1] @ router.head.weight.T).argmax())
                e = experts[choice](input_ids=x).logits[0, -1]
                t = int((F.log_softmax(o.logits[0, -1], -1) + F.log_softmax(e, -1)).argmax())
                out.append(t)
                if t in stops or "\n\n" in tok.decode(out, skip_special_tokens=True):
                    break
        text = tok.decode([t for t in out if t not in stops], skip_special_tokens=True)
        return text.split("\n\n")[0]

    assert got == [reference(c) for c in contexts]
    assert any(got)                          # something was generated


def test_per_sample_outcomes_of_the_first_metric_and_filter():
    from methods.core.results import InputError
    from methods.fusionroute.evaluate import per_sample

    out = {"results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.5,
                                 "exact_match_stderr,strict-match": 0.1, "exact_match,flexible-extract": 1.0}},
           "samples": {"gsm8k": [{"doc_id": 1, "filter": "strict-match", "exact_match": 0.0},
                                 {"doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
                                 {"doc_id": 0, "filter": "flexible-extract", "exact_match": 1.0},
                                 {"doc_id": 1, "filter": "flexible-extract", "exact_match": 1.0}]}}
    assert per_sample(out, "gsm8k") == ("exact_match,strict-match", [1, 0])
    out["samples"]["gsm8k"][0]["exact_match"] = 0.3
    with pytest.raises(InputError, match="not a 0/1 outcome"):
        per_sample(out, "gsm8k")


def test_paper_scale_claim_metrics_closed_form():
    """Benchmarks of unequal sizes and no comp domain: the margins are pooled rates over all
    documents, C3 is not measured (None), the rest as at tiny."""
    from methods.fusionroute.report import SYSTEMS, claim_metrics, table

    doms = ["add"] * 5 + ["rev"] * 3 + ["brk"] * 2
    rng = random.Random(0)
    correct = {s: [rng.randint(0, 1) for _ in doms] for s in SYSTEMS}
    em = {s: {d: 100.0 * sum(c for c, x in zip(correct[s], doms) if x == d) / doms.count(d)
              for d in ("add", "rev", "brk")} | {"macro": 100.0 * sum(correct[s]) / len(doms)} for s in SYSTEMS}
    res = {"correct": correct, "domains": doms, "em": em, "cdpo_changed": {"k": 2, "n": 10}, "pooled_macro": True}
    m = claim_metrics([res], [0])
    assert m["c3_comp_gain"] is None and m["per_seed"]["c3_comp_gain"] is None
    assert "c3_comp_gain" not in m["replicates"]
    assert m["replicates"]["c4_add_gain_vs_router"]["values"] == pytest.approx([m["c4_add_gain_vs_router"]])
    fr, eo = sum(correct["fusionroute"]) / 10, sum(correct["expert_only_routing"]) / 10
    assert m["c1_margin_vs_expert_only"] == pytest.approx(100 * (fr - eo), abs=1e-9)
    add = [i for i, d in enumerate(doms) if d == "add"]
    gain = 100 * (sum(correct["fusionroute"][i] for i in add) - sum(correct["router_alone"][i] for i in add)) / 5
    assert m["c4_add_gain_vs_router"] == pytest.approx(gain, abs=1e-9)
    assert "no comp documents" in m["notes"]["c3_comp_gain"]
    assert "| fusionroute |" in table([res], [0])
