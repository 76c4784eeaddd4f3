"""The diffusion mask id (run.diffusion_mask_id) and the "\\n" stop id under hub tokenizer
conventions. Tiny scale keeps its mapping exactly (char tokenizer: <unk> is the mask, the
"\\n" entry the stop, as before); a Qwen tokenizer (no unk, no mask, "\\n" spelt "Ċ") gets a
<|mask|> token with a mean-initialised embedding row at conversion, which a converted model
directory carries to decoding."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from methods.core.models import ModelConfig, build_model, load_model, save_model
from methods.core.results import InputError
from methods.core.tokenizer import token_id, train_tokenizer
from methods.efficient_dlm.config import EvalConfig
from methods.efficient_dlm.run import decode_all, diffusion_mask_id
from tests.core.hub_tokenizers import build_family_tokenizer

torch.set_num_threads(1)
SMALL = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64)


def test_tiny_scale_mapping_is_unchanged():
    tok = train_tokenizer(["0123456789+= abc\n"], "char")
    model = build_model(SMALL, tok, 0)
    rows = model.get_input_embeddings().weight.shape[0]
    assert diffusion_mask_id(tok, model) == tok.unk_token_id == diffusion_mask_id(tok)
    assert model.get_input_embeddings().weight.shape[0] == rows and len(tok) == rows   # nothing added
    assert token_id(tok, "\n") == tok.convert_tokens_to_ids("\n")


def test_qwen_tokenizer_gets_a_mask_token_that_survives_save_and_load(tmp_path):
    tok = build_family_tokenizer(tmp_path, "qwen")
    n = len(tok)
    model = build_model(SMALL, tok, 0)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    mask = diffusion_mask_id(tok, model)
    assert mask == n and tok.mask_token_id == n
    torch.testing.assert_close(model.get_input_embeddings().weight[mask].detach(), emb0[:n].mean(0),
                               rtol=0, atol=1e-7)
    save_model(model, tok, tmp_path / "conv")
    model2, tok2 = load_model(tmp_path / "conv")
    assert diffusion_mask_id(tok2) == mask
    assert model2.get_input_embeddings().weight.shape[0] == n + 1
    # decoding the converted model runs end to end with these ids (it crashed on None before)
    rows = [{"prompt": "x = 1;\n", "answer": "y", "task": "add"}, {"prompt": "The cat", "answer": " sat", "task": "rev"}]
    spec = {"pattern": "blk_clean", "shift": False}
    ecfg = EvalConfig(block=4, thresholds=[0.99, 0.9, 0.7, 0.5], max_new=8, n_per_task=300, batch_size=2)
    res = decode_all(model2, tok2, rows, "dlm", ecfg, threshold=0.9, spec=spec)
    assert 0.0 <= res["acc"] <= 1.0 and res["nfe"] >= 1
    res_ar = decode_all(model2, tok2, rows, "ar", ecfg)
    assert res_ar["nfe"] >= 1


def test_decoding_without_a_mask_token_names_it(tmp_path):
    tok = build_family_tokenizer(tmp_path, "llama3")
    with pytest.raises(InputError, match=r"has no mask token \(needed by efficient_dlm decoding of a converted model\)$"):
        diffusion_mask_id(tok)
