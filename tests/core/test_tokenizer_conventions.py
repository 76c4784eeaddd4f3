"""core.tokenizer's hub-convention helpers against real byte-level BPE tokenizers with the
Qwen2 and Llama-3 families' conventions (tests/core/hub_tokenizers.py: eos = pad and no unk;
bos, no pad and no unk; neither has a mask token), reloaded through AutoTokenizer. Checks:
ensure_pad, require_tokens, token_id, ensure_mask_token (id, one-token encoding, embedding
rows = mean of the old rows, save/reload) and text stops in HF generate = a hand-written
greedy loop that stops when the decoded text first contains the stop string."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

from methods.core.results import InputError
from methods.core.tokenizer import ensure_mask_token, ensure_pad, require_tokens, stop_criteria, stop_index, token_id
from tests.core.hub_tokenizers import build_family_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return build_family_tokenizer(tmp_path_factory.mktemp("tok"), "qwen")


@pytest.fixture(scope="module")
def llama3(tmp_path_factory):
    return build_family_tokenizer(tmp_path_factory.mktemp("tok"), "llama3")


def tiny_llama(vocab: int, seed: int = 0, tie: bool = False, rows: int | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=rows or vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=tie)
    return LlamaForCausalLM(cfg).eval()


def test_reloaded_tokenizers_have_the_families_conventions(qwen, llama3):
    assert qwen.pad_token_id == qwen.eos_token_id == qwen.convert_tokens_to_ids("<|endoftext|>")
    assert qwen.unk_token_id is None and qwen.mask_token_id is None
    assert llama3.pad_token_id is None and llama3.unk_token_id is None and llama3.mask_token_id is None
    assert llama3("hi")["input_ids"][0] == llama3.bos_token_id
    # the shared-assumption breakers: "\n" is not a vocabulary entry (byte-level: "Ċ") and
    # ".\n" is one token
    for tok in (qwen, llama3):
        assert tok.convert_tokens_to_ids("\n") is None
        assert tok.convert_ids_to_tokens(tok("ran.\n", add_special_tokens=False)["input_ids"])[-1] == ".Ċ"


def test_ensure_pad(qwen, llama3, tmp_path):
    assert ensure_pad(qwen) == qwen.convert_tokens_to_ids("<|endoftext|>")
    assert ensure_pad(llama3) == llama3.convert_tokens_to_ids("<|end_of_text|>")
    assert llama3.pad_token_id is None                       # not modified
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    bare = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a")),
                                   name_or_path="bare-tok")
    with pytest.raises(InputError, match="^tokenizer 'bare-tok' has neither a pad nor an eos token to pad with$"):
        ensure_pad(bare)


def test_require_tokens(qwen, llama3):
    assert require_tokens(llama3, ["bos", "eos_token"]) == {"bos": llama3.bos_token_id, "eos": llama3.eos_token_id}
    with pytest.raises(InputError) as e:
        require_tokens(llama3, ["eos", "pad"], "batched scoring")
    assert str(e.value) == f"tokenizer {llama3.name_or_path!r} has no pad token (needed by batched scoring)"
    with pytest.raises(InputError, match="has no unk token$"):
        require_tokens(qwen, ["unk"])
    with pytest.raises(InputError, match="unknown special-token role 'padding'"):
        require_tokens(qwen, ["padding"])


def test_token_id(qwen):
    nl = token_id(qwen, "\n")
    assert qwen.convert_ids_to_tokens(nl) == "Ċ"
    with pytest.raises(InputError, match=r"'The cat' is 2 tokens, not one$"):
        token_id(qwen, "The cat")


@pytest.mark.parametrize("family,tie,extra_rows", [("qwen", False, 0), ("qwen", True, 0),
                                                   ("llama3", False, 0), ("qwen", False, 5)])
def test_ensure_mask_token(qwen, llama3, tmp_path, family, tie, extra_rows):
    """New id = old vocabulary size, one token, new embedding row(s) = mean of the old tokens'
    rows (exactly: the mean is copied, not sampled), old rows untouched; with a padded
    embedding matrix (extra_rows, as Qwen's) nothing is resized and only the mask's row is set.
    Saved and reloaded, the tokenizer keeps the id, and a second call changes nothing."""
    import copy

    tok = copy.deepcopy(qwen if family == "qwen" else llama3)
    n = len(tok)
    model = tiny_llama(n, tie=tie, rows=n + extra_rows)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.get_output_embeddings().weight.detach().clone()
    tid = ensure_mask_token(tok, model)
    assert tid == n == tok.mask_token_id and len(tok) == n + 1
    assert tok("a<|mask|>b", add_special_tokens=False)["input_ids"][1] == tid
    assert tok("<|mask|>", add_special_tokens=False)["input_ids"] == [tid]
    emb = model.get_input_embeddings().weight.detach()
    head = model.get_output_embeddings().weight.detach()
    assert emb.shape[0] == max(n + 1, n + extra_rows) == model.config.vocab_size
    torch.testing.assert_close(emb[tid], emb0[:n].mean(0), rtol=0, atol=1e-7)
    torch.testing.assert_close(emb[:n], emb0[:n], rtol=0, atol=0)
    torch.testing.assert_close(emb[tid + 1:], emb0[tid + 1:], rtol=0, atol=0)   # other padding rows
    if tie:
        assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    else:
        torch.testing.assert_close(head[tid], head0[:n].mean(0), rtol=0, atol=1e-7)
        torch.testing.assert_close(head[:n], head0[:n], rtol=0, atol=0)
    # the model runs on the new id, and the old tokens' logits are unchanged
    x = torch.tensor([[3, 7, tid, 5]])
    assert model(input_ids=x).logits.shape[-1] == emb.shape[0]
    before = tiny_llama(n, tie=tie, rows=n + extra_rows)(input_ids=torch.tensor([[3, 7, 5]])).logits[..., :n]
    torch.testing.assert_close(model(input_ids=torch.tensor([[3, 7, 5]])).logits[..., :n], before,
                               rtol=0, atol=1e-6)
    # idempotent, and survives save/reload
    assert ensure_mask_token(tok, model) == tid and model.get_input_embeddings().weight.shape[0] == emb.shape[0]
    from transformers import AutoTokenizer

    tok.save_pretrained(tmp_path / "t")
    again = AutoTokenizer.from_pretrained(str(tmp_path / "t"))
    assert again.mask_token_id == tid and ensure_mask_token(again) == tid and len(again) == n + 1


def test_mask_token_that_is_an_ordinary_token_is_refused(qwen):
    import copy

    tok = copy.deepcopy(qwen)
    with pytest.raises(InputError, match="mask token 'The' is already an ordinary token"):
        ensure_mask_token(tok, token="The")
    assert tok.mask_token_id is None and len(tok) == len(qwen)       # left as it was


def _greedy_until(model, tok, prompt_ids, stops, max_new):
    """The reference: one token at a time, no cache, stop as soon as the decoded continuation
    contains a stop string."""
    ids, new = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            ids.append(nxt)
            new.append(nxt)
            if any(s in tok.decode(new) for s in stops):
                break
    return new


def _pick_stops(tok, gen):
    """Stop strings read off a free greedy continuation (printable ASCII pieces only: a random
    model also emits lone bytes of multi-byte characters): the tail of a multi-character token
    (inside a merged token, where no id-based stop can see it) and a string spanning a token
    boundary."""
    pieces = [tok.decode([t]) for t in gen]
    ok = [p != "" and p.isascii() and p.isprintable() for p in pieces]
    k = next(i for i, p in enumerate(pieces) if ok[i] and len(p) >= 2)
    j = next(i for i in range(1, len(pieces)) if ok[i - 1] and ok[i])
    return pieces[k][1:], pieces[j - 1][-1] + pieces[j][0]


# seeds whose free continuation of row 0 emits a merged punctuation+newline token ("?\n")
SEEDS = {"qwen": 3, "llama3": 1}


@pytest.mark.parametrize("family", ["qwen", "llama3"])
def test_text_stops_match_a_greedy_loop(qwen, llama3, family):
    tok = qwen if family == "qwen" else llama3
    model = tiny_llama(len(tok), seed=SEEDS[family])
    prompts = [tok("The cat sat.\nThe", add_special_tokens=False)["input_ids"],
               tok("x = 1;\n", add_special_tokens=False)["input_ids"]]
    free = [_greedy_until(model, tok, p, (), 24) for p in prompts]
    # "\n" first appears inside a merged token: an id-based "\n" stop would run past it
    first_nl = next(i for i, t in enumerate(free[0]) if "\n" in tok.decode([t]))
    assert tok.decode([free[0][first_nl]]) != "\n"
    inside, across = _pick_stops(tok, free[0] + free[1])
    for stops in [("\n",), (inside,), (across,), (inside, across, "\n")]:
        want = [_greedy_until(model, tok, p, stops, 24) for p in prompts]
        assert any(len(w) < 24 for w in want), stops        # the stop does occur
        # batched, left-padded HF generate with the text criterion
        w = max(map(len, prompts))
        pad = ensure_pad(tok)
        x = torch.tensor([[pad] * (w - len(p)) + p for p in prompts])
        m = torch.tensor([[0] * (w - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad():
            y = model.generate(input_ids=x, attention_mask=m, do_sample=False, max_new_tokens=24,
                               eos_token_id=[], pad_token_id=pad, stopping_criteria=stop_criteria(tok, stops, w))
        got = [row[:stop_index(tok, row, stops)] for row in y[:, w:].tolist()]
        assert got == want, stops
        # generation ended at the step the last row stopped (the criterion, not max_new)
        assert y.shape[1] - w == max(len(g) for g in want)
        # and each cut is at the first containment: one token less does not contain a stop
        for g in got:
            if any(s in tok.decode(g) for s in stops):
                assert not any(s in tok.decode(g[:-1]) for s in stops)
    assert len(_greedy_until(model, tok, prompts[0], ("\n",), 24)) == first_nl + 1


def test_stop_index_edge_cases(qwen):
    ids = qwen("ab.\ncd.\n", add_special_tokens=False)["input_ids"]
    assert stop_index(qwen, ids, ()) == len(ids)
    assert stop_index(qwen, ids, ("zz",)) == len(ids)
    # "\n" lives inside the merged ".\n" token: the cut is right after it
    k = stop_index(qwen, ids, ("\n",))
    assert qwen.decode(ids[:k]) == "ab.\n"
