"""methods/core/{tokenizer,data,models,evaluate}.py: tokenizers round-trip and reload, batches
are what they claim to be (checked against the raw token array), HF directories reload to
identical logits, record readers agree across formats, and our lm-eval glue agrees with
lm-eval itself and with hand-written greedy decoding / log-likelihoods."""
from __future__ import annotations

import json
import math
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # everything here is local; never reach out
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch
import torch.nn.functional as F

from methods.core import train as T
from methods.core.data import PromptAnswerBatches, TokenStream, encode_prompt_answer, load_records
from methods.core.evaluate import answer_nll, export_task, metric, run_lm_eval
from methods.core.models import ModelConfig, build_model, load_model, save_model
from methods.core.results import InputError, write_jsonl
from methods.core.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

torch.set_num_threads(1)

ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCQXYZ0123456789.,:;!?-+=>()'\"\n\téü"


def random_text(seed: int, n: int, alphabet: str = ALPHABET) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


# 5 × 400 random characters: every alphabet symbol occurs (checked in the test)
CORPUS = [random_text(100 + i, 400) for i in range(5)]


@pytest.fixture(scope="module")
def char_tok():
    return train_tokenizer(CORPUS, kind="char")


def ids_of(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


# --------------------------------------------------------------------------- tokenizer ----
ROUND_TRIP = ["", " ", "\n", "  two  spaces  ", "line one\nline two\n\n", "\ttab\t and\nnl ",
              "sum 3 4 -> 7\n", "Q: who?\nA: ", "éüé  ü\n"]


def test_char_tokenizer_round_trip_one_token_per_char(tmp_path, char_tok):
    from transformers import AutoTokenizer

    texts = ROUND_TRIP + [random_text(s, 200) for s in range(20)]
    save_tokenizer(char_tok, tmp_path / "tok")
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert load_tokenizer(tmp_path / "tok")(texts[4], add_special_tokens=False)["input_ids"] == ids_of(char_tok, texts[4])
    assert set("".join(CORPUS)) == set(ALPHABET)
    assert len(char_tok) == len(set(ALPHABET)) + 3               # every char + <pad> <eos> <unk>
    for x in texts:
        ids = ids_of(char_tok, x)
        assert len(ids) == len(x)
        assert char_tok.convert_ids_to_tokens(ids) == list(x)     # token i *is* character i
        assert char_tok.unk_token_id not in ids
        assert char_tok.decode(ids) == x                          # exact, whitespace included
        assert ids_of(reloaded, x) == ids
        assert reloaded.decode(ids) == x
    # an unseen character maps to <unk> (one token), it is not silently dropped or split
    assert ids_of(char_tok, "a§b") == [ids_of(char_tok, "a")[0], char_tok.unk_token_id, ids_of(char_tok, "b")[0]]


def test_bpe_tokenizer_round_trip(tmp_path):
    from transformers import AutoTokenizer

    corpus = ["the cat sees the dog near the river. " * 20, "sum 12 30 -> 42\n" * 20]
    tok = train_tokenizer(corpus, kind="bpe", vocab_size=300)
    save_tokenizer(tok, tmp_path / "bpe")
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path / "bpe"))
    # byte-level: text with characters never seen in training round-trips too
    texts = ROUND_TRIP + ["the cat sees the dog", "naïve ☃ 日本語\r\n\x00 end", random_text(7, 300)]
    for x in texts:
        ids = ids_of(tok, x)
        assert tok.decode(ids) == x
        assert ids_of(reloaded, x) == ids and reloaded.decode(ids) == x
    assert len(ids_of(tok, "the cat sees the dog")) < len("the cat sees the dog")   # merges learnt
    with pytest.raises(ValueError):
        train_tokenizer(corpus, kind="bpe", vocab_size=100)


# --------------------------------------------------------------------------- batchers ----
def test_token_stream_batches_are_shifted_windows_of_the_stream():
    n, L = 500, 16
    # distinct tokens: a window's first token is its offset, so the check is against the raw array
    tokens = torch.arange(n)
    ts = TokenStream(tokens.tolist(), L)
    b = ts.batch(step=3, batch_size=32, seed=1)
    assert b["input_ids"].shape == b["labels"].shape == (32, L)
    for row_in, row_lab in zip(b["input_ids"], b["labels"]):
        o = int(row_in[0])
        assert 0 <= o and o + L + 1 <= n
        assert torch.equal(row_in, tokens[o:o + L])
        assert torch.equal(row_lab, tokens[o + 1:o + L + 1])
    # a random (repetitive) stream: labels[:, t] == input_ids[:, t+1], i.e. shifted by one
    rnd = TokenStream(torch.randint(0, 7, (300,), generator=torch.Generator().manual_seed(0)).tolist(), L)
    rb = rnd.batch(0, 8, 0)
    assert torch.equal(rb["labels"][:, :-1], rb["input_ids"][:, 1:])


def test_token_stream_batches_are_pure_functions_of_seed_and_step():
    ts = TokenStream(list(range(1000)), 8)
    a = ts.batch(5, 16, seed=2)
    ts.batch(0, 16, seed=2)                                         # interleaved calls change nothing
    torch.manual_seed(999)                                          # nor does the global RNG
    again = TokenStream(list(range(1000)), 8).batch(5, 16, seed=2)  # nor a new instance
    assert all(torch.equal(a[k], again[k]) for k in a)
    assert not torch.equal(a["input_ids"], ts.batch(6, 16, seed=2)["input_ids"])
    assert not torch.equal(a["input_ids"], ts.batch(5, 16, seed=3)["input_ids"])
    # different steps draw different offsets overall (not a fixed set reused)
    starts = {int(ts.batch(s, 16, 2)["input_ids"][i, 0]) for s in range(20) for i in range(16)}
    assert len(starts) > 150


@pytest.mark.parametrize("n,L,bs,maxb", [(101, 10, 3, 100), (100, 10, 4, 100), (1000, 7, 5, 3)])
def test_sequential_batches_tile_the_stream(n, L, bs, maxb):
    tokens = torch.arange(n) * 3 + 1
    ts = TokenStream(tokens.tolist(), L)
    bs_ = ts.sequential_batches(bs, maxb)
    inputs = torch.cat([b["input_ids"] for b in bs_])
    labels = torch.cat([b["labels"] for b in bs_])
    windows = min(maxb * bs, (n - 1) // L)
    assert inputs.shape == (windows, L)
    assert all(b["input_ids"].shape[0] <= bs for b in bs_)
    # consecutive, non-overlapping windows from the start; labels are the stream shifted by one
    assert torch.equal(inputs.flatten(), tokens[:windows * L])
    assert torch.equal(labels.flatten(), tokens[1:windows * L + 1])


def test_prompt_answer_batches_label_exactly_the_answer(char_tok):
    # prompts without trailing whitespace: this test is about shifting/masking/padding; where a
    # trailing separator's tokens belong is fixed by lm-eval (see the lm-eval tests below)
    pairs = [("Q: cat?\nA:", " dog"), ("sum 3 4 ->", " 7"), ("x", "a longer answer"), ("ab", "c")]
    end = "\n"
    pa = PromptAnswerBatches(pairs, char_tok, end=end)
    b = pa.collate([0, 1, 2, 3])
    width = max(len(p + a + end) for p, a in pairs)
    assert b["input_ids"].shape == b["labels"].shape == b["attention_mask"].shape == (4, width)
    for i, (p, a) in enumerate(pairs):
        full = p + a + end
        ids, lab, mask = b["input_ids"][i], b["labels"][i], b["attention_mask"][i]
        assert mask.tolist() == [1] * len(full) + [0] * (width - len(full))
        assert char_tok.decode(ids[: len(full)].tolist()) == full
        assert (ids[len(full):] == char_tok.pad_token_id).all()
        pos = (lab != -100).nonzero().flatten().tolist()
        # position t predicts token t+1: the targets are the answer+end characters, exactly
        assert pos == list(range(len(p) - 1, len(full) - 1))
        assert char_tok.decode(lab[pos].tolist()) == a + end
        assert torch.equal(lab[pos], ids[torch.tensor(pos) + 1])
    # batch(step) is a pure function of (seed, step)
    x, y = pa.batch(4, 8, 0), pa.batch(4, 8, 0)
    assert all(torch.equal(x[k], y[k]) for k in x)
    # sequential batches cover every item once, in order
    seq = pa.sequential_batches(3)
    assert [b_["input_ids"].shape[0] for b_ in seq] == [3, 1]


# ----------------------------------------------------------------------------- models ----
def tiny_model(tok, seed=0, tie=True):
    return build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=128,
                                   tie_embeddings=tie), tok, seed)


@pytest.mark.parametrize("tie", [True, False])
def test_save_load_model_identical_logits(tmp_path, char_tok, tie):
    from transformers import AutoModelForCausalLM

    model = tiny_model(char_tok, seed=3, tie=tie).eval()
    out = tmp_path / "model"
    save_model(model, char_tok, out, extra_files={"NOTE.txt": "hi"})
    files = {p.name for p in out.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "NOTE.txt"} <= files
    assert not any(f.endswith((".bin", ".pt", ".pth", ".pkl", ".ckpt")) for f in files)
    assert not [p for p in tmp_path.iterdir() if p.name != "model"]      # no temp dirs left
    x = torch.tensor([ids_of(char_tok, "sum 3 4 -> 7\nQ: cat?"), ids_of(char_tok, "hello world, abc ok!")])
    with torch.no_grad():
        want = model(input_ids=x).logits
        hf = AutoModelForCausalLM.from_pretrained(str(out)).eval()
        ours, tok2 = load_model(out)
        assert torch.equal(hf(input_ids=x).logits, want)
        assert torch.equal(ours(input_ids=x).logits, want)
    assert (ours.lm_head.weight is ours.model.embed_tokens.weight) == tie
    assert ids_of(tok2, "Q: cat?\n") == ids_of(char_tok, "Q: cat?\n")
    # same seed ⇒ same init; different seed ⇒ different
    assert torch.equal(tiny_model(char_tok, seed=3, tie=tie).model.embed_tokens.weight, model.model.embed_tokens.weight)
    assert not torch.equal(tiny_model(char_tok, seed=4, tie=tie).model.embed_tokens.weight, model.model.embed_tokens.weight)
    # saving again replaces the directory (no stale files from the previous save)
    save_model(model, char_tok, out)
    assert not (out / "NOTE.txt").exists()


def test_load_model_rejects_dir_without_config(tmp_path, char_tok):
    d = tmp_path / "not_a_model"
    save_tokenizer(char_tok, d)                 # tokenizer files, but no config.json
    with pytest.raises(InputError, match="config.json"):
        load_model(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no config.json"):
        load_model(tmp_path / "empty")


# ---------------------------------------------------------------------------- records ----
ROWS = [{"prompt": "sum 1 2 -> ", "answer": "3", "n": 1}, {"prompt": "Q: x?\nA: ", "answer": "y", "n": 2},
        {"prompt": "", "answer": "", "n": 3}]
ROWS_TEST = [{"prompt": "t", "answer": "u", "n": 9}]


def test_load_records_jsonl_and_saved_datasets_agree(tmp_path):
    import datasets

    write_jsonl(tmp_path / "r.jsonl", ROWS)
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))
    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS),
                          "test": datasets.Dataset.from_list(ROWS_TEST)}).save_to_disk(str(tmp_path / "dd"))
    assert load_records(tmp_path / "r.jsonl") == ROWS
    assert load_records(tmp_path / "ds") == ROWS
    assert load_records(str(tmp_path / "dd"), split="train") == ROWS
    assert load_records(tmp_path / "dd", split="test") == ROWS_TEST
    with pytest.raises(InputError, match="validation"):
        load_records(tmp_path / "dd", split="validation")
    with pytest.raises(InputError, match="missing"):
        load_records(tmp_path / "nope.jsonl")
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="not a JSONL file or saved dataset"):
        load_records(tmp_path / "plain")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(InputError, match="line 2"):
        load_records(tmp_path / "bad.jsonl")


# ------------------------------------------------------------------------ lm-eval glue ----
ARITH_ALPHABET = "sum0123456789 ->\n"


def arith(a: int, b: int, style: str) -> dict:
    """`world` is the format the wd_plasticity tasks use (prompt ends in a space); `tight` puts
    the separator space at the start of the answer instead (no trailing whitespace in the prompt)."""
    if style == "world":
        return {"prompt": f"sum {a} {b} -> ", "answer": str(a + b)}
    return {"prompt": f"sum {a} {b} ->", "answer": f" {a + b}"}


def arith_records(n: int, seed: int, style: str = "world") -> list[dict]:
    rng = random.Random(seed)
    return [arith(rng.randrange(10), rng.randrange(10), style) for _ in range(n)]


@pytest.fixture(scope="module")
def arith_tok():
    return train_tokenizer([ARITH_ALPHABET], kind="char")


@pytest.fixture(scope="module")
def trained_arith_model(arith_tok):
    """Briefly trained (a few seconds) so greedy decoding emits digits and newlines, not noise."""
    text = "".join(r["prompt"] + r["answer"] + "\n" for r in arith_records(3000, seed=0))
    model = build_model(ModelConfig(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_seq_len=64), arith_tok, 0)
    ts = TokenStream.from_text(text, arith_tok, 32)
    old = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        T.train(model, lambda s: ts.batch(s, 16, 0),
                T.TrainConfig(steps=100, batch_size=16, lr=3e-3, warmup_steps=10, log_every=100))
    finally:
        if old is None:
            os.environ.pop("TQDM_DISABLE")
        else:
            os.environ["TQDM_DISABLE"] = old
    return model.eval()


def hand_logprob(model, tok, context: str, continuation: str) -> float:
    """log P(continuation | context): one unpadded forward pass, summed log-softmax."""
    c, x = ids_of(tok, context), ids_of(tok, continuation)
    with torch.no_grad():
        logp = F.log_softmax(model(input_ids=torch.tensor([c + x])).logits[0].double(), -1)
    return float(sum(logp[len(c) - 1 + i, t] for i, t in enumerate(x)))


def hand_greedy(model, tok, prompt: str, max_new: int, stop: str = "\n") -> str:
    """Argmax token by token, no cache, no padding; stop at `stop` or EOS."""
    ids, new = ids_of(tok, prompt), []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax())
            if nxt == tok.eos_token_id:
                break
            new.append(nxt)
            if stop in tok.decode(new):
                break
    return tok.decode(new).split(stop)[0]


def write_task_data(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("style", ["tight", "world"])
def test_answer_nll_equals_lm_eval_log_perplexity(tmp_path, arith_tok, style):
    """log(lm-eval `perplexity`) = mean over docs of −log P(answer | prompt) as lm-eval scores
    it; `answer_nll` claims to compute the same number. A random model makes any difference in
    *which* tokens are scored large (≈ log V), so 1e-4 is a sharp test."""
    model = tiny_model(arith_tok, seed=1).eval()
    records = arith_records(24, seed=5, style=style)
    data = write_task_data(tmp_path / "data.jsonl", records)
    export_task(tmp_path / "tasks", "arith_ll", data, "loglikelihood")
    res = run_lm_eval(model, arith_tok, ["arith_ll"], tmp_path / "tasks", batch_size=8)
    lm_eval_nll = math.log(metric(res, "arith_ll", "perplexity"))
    # lm-eval's number is the hand log-likelihood with lm-eval's convention of moving the
    # context's trailing whitespace into the continuation (TemplateLM._encode_pair)
    def lm_eval_split(r):
        ctx = r["prompt"].rstrip()
        return ctx, r["prompt"][len(ctx):] + r["answer"]
    hand = -sum(hand_logprob(model, arith_tok, *lm_eval_split(r)) for r in records) / len(records)
    assert lm_eval_nll == pytest.approx(hand, abs=1e-4)
    # and our helper must agree with lm-eval (it is used interchangeably with log perplexity)
    assert answer_nll(model, arith_tok, records, batch_size=5) == pytest.approx(lm_eval_nll, abs=1e-4)


@pytest.mark.parametrize("style,kind", [("tight", "char"), ("tight", "bpe"), ("world", "char")])
def test_encode_prompt_answer_scores_the_tokens_lm_eval_scores(arith_tok, style, kind):
    """encode_prompt_answer's docstring: "the tokens the model is trained to predict are exactly
    the ones lm-eval scores". Check against lm-eval's own context/continuation split."""
    from lm_eval.models.huggingface import HFLM

    tok = arith_tok if kind == "char" else train_tokenizer(
        ["".join(r["prompt"] + r["answer"] + "\n" for r in arith_records(500, 0, style))], "bpe", 300)
    model = tiny_model(tok, seed=1).eval()
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=1, device="cpu", max_length=64)
    for r in arith_records(8, seed=2, style=style):
        ctx_enc, cont_enc = lm._encode_pair(r["prompt"], r["answer"])
        ids, start = encode_prompt_answer(tok, r["prompt"], r["answer"])
        assert (ids[:start], ids[start:]) == (ctx_enc, cont_enc), r


def test_lm_eval_exact_match_equals_hand_greedy(tmp_path, arith_tok, trained_arith_model):
    model, tok = trained_arith_model, arith_tok
    max_gen = 6
    records = arith_records(30, seed=11)
    preds = [hand_greedy(model, tok, r["prompt"], max_gen) for r in records]
    # make a third of the answers the greedy output itself, so lm-eval must reproduce these
    # generations character for character for the score to match (and 0 < EM < 1 for sure)
    for i in range(0, len(records), 3):
        records[i] = {**records[i], "answer": preds[i]}
    for i in range(1, len(records), 3):
        if preds[i] == records[i]["answer"]:
            records[i] = {**records[i], "answer": preds[i] + "0"}
    em_hand = sum(p == r["answer"] for p, r in zip(preds, records)) / len(records)
    assert 0 < em_hand < 1
    assert all(p and p.isdigit() for p in preds)        # the model learnt the format
    data = write_task_data(tmp_path / "data.jsonl", records)
    export_task(tmp_path / "tasks", "arith_gen", data, "generate_until", max_gen_toks=max_gen)
    res = run_lm_eval(model, tok, ["arith_gen"], tmp_path / "tasks", batch_size=7)
    assert metric(res, "arith_gen", "exact_match") == pytest.approx(em_hand, abs=1e-12)
    assert res["n_samples"]["arith_gen"]["effective"] == len(records)


def test_model_dir_loads_in_lm_eval_hf_by_path(tmp_path, arith_tok):
    """`--model hf --model_args pretrained=<dir>` semantics: HFLM loads the saved directory by
    path and scores exactly what the in-memory model scores (and what we compute by hand)."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    model = tiny_model(arith_tok, seed=2).eval()
    save_model(model, arith_tok, tmp_path / "m")
    from_dir = HFLM(pretrained=str(tmp_path / "m"), device="cpu", batch_size=4)
    in_mem = HFLM(pretrained=model, tokenizer=arith_tok, device="cpu", batch_size=4, max_length=64)
    assert from_dir.model is not model and from_dir.model.dtype == torch.float32
    records = arith_records(10, seed=3, style="tight")
    reqs = [Instance("loglikelihood", doc=r, arguments=(r["prompt"], r["answer"]), idx=0) for r in records]
    ll_dir = [ll for ll, _ in from_dir.loglikelihood(reqs)]
    ll_mem = [ll for ll, _ in in_mem.loglikelihood(reqs)]
    hand = [hand_logprob(model, arith_tok, r["prompt"], r["answer"]) for r in records]
    assert ll_dir == pytest.approx(ll_mem, abs=1e-5)
    assert ll_dir == pytest.approx(hand, abs=1e-4)
