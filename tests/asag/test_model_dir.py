"""The tiny ASAG model directory is a plain HF directory: AutoTokenizer loads its tokenizer, whose
ids are those of the word vocabulary the model was trained on, and AutoModelForCausalLM its
model, with the logits of the decoding path's `load_tiny`."""
import json

import torch
import yaml

from methods.asag.config import DataConfig, TrainRunConfig
from methods.asag.data import Vocab, build
from methods.asag.train import load_tiny, train_tiny
from methods.core.config import from_dict
from tests.workflow.conftest import ROOT


def test_model_dir_loads_with_auto_classes(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sec = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["asag"]
    build(from_dict(DataConfig, {**sec["data"], "n_train": 200}), tmp_path / "data")
    cfg = from_dict(TrainRunConfig, {**sec["train"], "train": {**sec["train"]["train"], "steps": 2}})
    train_tiny(cfg, tmp_path / "data", tmp_path / "model")

    tok = AutoTokenizer.from_pretrained(tmp_path / "model")
    vocab = Vocab(json.loads((tmp_path / "model" / "vocab.json").read_text()))
    assert len(tok) == len(vocab) and (tok.pad_token_id, tok.eos_token_id) == (vocab.pad_token_id, vocab.eos_token_id)
    rows = [json.loads(l) for l in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    for r in rows + [json.loads(l) for l in (tmp_path / "data" / "test.jsonl").read_text().splitlines()]:
        text = r["prompt"] + " " + (r.get("thought") or "")
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == vocab.encode(text)
        assert tok.decode(ids) == vocab.decode(ids)
    # every vocabulary word, specials included, is its own token
    assert tok(" ".join(vocab.words), add_special_tokens=False)["input_ids"] == list(range(len(vocab)))

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "model", attn_implementation="eager").eval()
    ref, _ = load_tiny(tmp_path / "model")
    ids = torch.tensor([vocab.encode(rows[0]["prompt"] + " " + rows[0]["thought"])])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)
