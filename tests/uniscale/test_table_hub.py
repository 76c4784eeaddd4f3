"""The replay table's generation with hub tokenizer conventions (paper scale: Qwen3 members):
a byte-level BPE token can carry text past a stop (";s", "?\\n"), so a completion is cut at the
stop in its decoded text; the model's own eos ends a completion as a newline does (otherwise
generation runs on past it and "<|endoftext|>" lands in the parsed answer); the beam's length
cap counts tokens, not characters."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from methods.core.model_pool import tasks
from methods.core.models import ModelConfig, build_model
from methods.uniscale.table import Gen, TableConfig, cut_at_stop
from tests.core.hub_tokenizers import build_family_tokenizer

torch.set_num_threads(1)
SMALL = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64, tie_embeddings=False)
PROMPTS = ["Q:4+7*3=", "R:abcdef=", "Answer: 4", "Q: why?\nA:"]


def table_cfg(**kw) -> TableConfig:
    """A complete table config (every key is required); Gen reads only temperature and chunk."""
    base = dict(n_queries=600, bon=[2, 4, 8], beam_cp=4, beam_bs=2, max_rounds=6, temperature=1.0,
                max_new_tokens=48, chunk=1024, intensity=156.0, bytes_w=2, bytes_kv=2, seed=1)
    return TableConfig(**{**base, **kw})


def test_cut_at_stop():
    assert cut_at_stop("s:11*3;s:33", (";", "\n")) == "s:11*3;"
    assert cut_at_stop("A:33\n\nQ:", ("\n",)) == "A:33\n"
    assert cut_at_stop("s:1\n;x", ("\n", ";")) == "s:1\n"          # the earliest stop wins
    assert cut_at_stop("no stop", ("\n",)) == "no stop"


@pytest.mark.parametrize("family", ["qwen", "llama3"])
def test_completions_end_at_the_stop_text(tmp_path, family):
    tok = build_family_tokenizer(tmp_path, family)
    model = build_model(SMALL, tok, 3).eval()
    g = Gen(model, tok, table_cfg(temperature=1.0, chunk=2))
    torch.manual_seed(0)
    for stop_step in (False, True):
        stops = ("\n", ";") if stop_step else ("\n",)
        outs, lens = g.generate(PROMPTS * 4, True, stop_step, 16)
        for o, n in zip(outs, lens):
            assert 1 <= n <= 16
            first = min((o.find(s) for s in stops if s in o), default=-1)
            # at most one stop, at the very end; a completion without one used every token
            assert first in (-1, len(o) - 1), o
            assert first == len(o) - 1 or n == 16, (o, n)


def test_the_models_eos_ends_the_answer(tmp_path):
    tok = build_family_tokenizer(tmp_path, "qwen")
    model = build_model(SMALL, tok, 0).eval()
    eos = tok.eos_token_id
    head = torch.nn.Linear(SMALL.d_model, model.config.vocab_size, bias=True)
    with torch.no_grad():   # a model that answers "A:4" and then emits its eos
        head.weight.zero_()
        head.bias.zero_()
    model.lm_head = head
    script = tok("A:4", add_special_tokens=False)["input_ids"] + [eos]
    calls = {"n": 0}

    def pre(_mod, args):
        step = calls["n"]
        calls["n"] += 1
        with torch.no_grad():
            head.bias.zero_()
            head.bias[script[min(step, len(script) - 1)]] = 10.0

    model.lm_head.register_forward_pre_hook(pre)
    g = Gen(model, tok, table_cfg(chunk=1))
    assert g.eos == ("<|endoftext|>",)
    outs, lens = g.generate(["Q:2+2="], False, False, 12)
    assert outs == ["A:4" + tasks.END] and lens == [len(script)]
    assert tasks.parse(outs[0])[1] == "4"
