"""pool.complete with hub tokenizer conventions: "\\n" is no vocabulary entry of a byte-level
BPE ("Ċ") and is merged into tokens such as "?Ċ" and ").Ċ" (the old stop-id lookup gave None
and crashed generate); Llama-3 has no pad. Completions must end exactly where a hand-written
greedy loop, stopping when the decoded text first contains the stop, ends them."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from methods.core.model_pool.pool import complete
from methods.core.models import ModelConfig, build_model
from tests.core.hub_tokenizers import build_family_tokenizer

torch.set_num_threads(1)
# untied: a tiny tied random model just repeats the prompt's last token
SMALL = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64, tie_embeddings=False)
PROMPTS = ["The cat sat.\nThe", "x = 1;\n", "Answer: 4", "Q: why?\nA:"]
# seeds under which some completions end on a merged newline token ("?\n", ").\n")
SEEDS = {"qwen": 9, "llama3": 8}


def greedy_until(model, tok, prompt, stop, max_new):
    ids, new = tok(prompt, add_special_tokens=False)["input_ids"], []
    with torch.no_grad():
        for _ in range(max_new):
            new.append(int(model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax()))
            if stop in tok.decode(new):
                break
    return new


@pytest.mark.parametrize("family", ["qwen", "llama3"])
def test_complete_stops_on_text_like_a_greedy_loop(tmp_path, family):
    tok = build_family_tokenizer(tmp_path, family)
    model = build_model(SMALL, tok, SEEDS[family]).eval()
    got = complete(model, tok, PROMPTS, 24, stops=("\n",))
    assert got == [greedy_until(model, tok, p, "\n", 24) for p in PROMPTS]
    last = [tok.decode(g[-1:]) for g in got if "\n" in tok.decode(g)]
    assert any(t != "\n" and t.endswith("\n") for t in last), last    # a merged stop token was caught
