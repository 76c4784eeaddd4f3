"""methods/core/shards.py and the `shards` DAG step: the tokens on disk are the tokenizer's ids
of the documents (computed here one document at a time, independently of the writer's batched
calls); a sharded stream draws exactly the batches the in-memory `TokenStream` draws on the
same tokens, also when windows cross shard boundaries; batches are pure functions of
(seed, step); the id width follows the vocabulary; damaged directories fail in one line naming
the file, and an interrupted write leaves nothing behind."""
from __future__ import annotations

import json
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import pytest
import torch

from methods.core import cli
from methods.core.__main__ import build_parser
from methods.core.data import TokenStream, stream_texts, write_joined_split
from methods.core.results import InputError, write_jsonl
from methods.core.shards import ShardedTokenStream, read_index, write_corpus_shards, write_shards
from methods.core.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

torch.set_num_threads(1)
WORDS = ["the", "cat", "sees", "a", "dog", "river", "é", "ü", "42", "+", "=", "\n", "  ", "Q:", "A:"]


def make_docs(n: int, seed: int = 0) -> list[str]:
    """Documents of random words, internal newlines and runs of spaces included."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30))) for _ in range(n)]


DOCS = make_docs(60)


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok") / "bpe"
    save_tokenizer(train_tokenizer(make_docs(300, seed=1), "bpe", vocab_size=300), d)
    return d


@pytest.fixture(scope="module")
def bpe(bpe_dir):
    return load_tokenizer(bpe_dir)


def expected_ids(tok, docs, eos=True) -> list[int]:
    """The reference: each document encoded alone, EOS after each."""
    out = []
    for d in docs:
        out += tok.encode(d, add_special_tokens=False) + ([tok.eos_token_id] if eos else [])
    return out


def all_tokens(path) -> list[int]:
    s = ShardedTokenStream(path, 1)
    return s.read(0, len(s)).tolist()


# ------------------------------------------------------------------------ (a) round trip ----
@pytest.mark.parametrize("shard_tokens,batch_docs", [(1 << 20, 1024), (37, 7)])
def test_round_trip_equals_per_document_encoding(tmp_path, bpe, shard_tokens, batch_docs):
    idx = write_shards(iter(DOCS), bpe, tmp_path / "s", shard_tokens=shard_tokens, batch_docs=batch_docs)
    want = expected_ids(bpe, DOCS)
    assert all_tokens(tmp_path / "s") == want
    # the files themselves: raw little-endian uint16, concatenated in index order, every shard
    # but the last full
    raw = np.concatenate([np.fromfile(tmp_path / "s" / s["file"], dtype="<u2") for s in idx["shards"]])
    assert raw.tolist() == want
    sizes = [s["tokens"] for s in idx["shards"]]
    assert all(n == shard_tokens for n in sizes[:-1]) and 0 < sizes[-1] <= shard_tokens
    assert idx["total_tokens"] == len(want) and idx["vocab_size"] == len(bpe) and idx["eos_id"] == bpe.eos_token_id
    assert json.loads((tmp_path / "s" / "index.json").read_text()) == idx
    read_index(tmp_path / "s", verify=True)  # the recorded sha256 are the files'


def test_max_tokens_and_no_eos(tmp_path, bpe):
    write_shards(DOCS, bpe, tmp_path / "s", max_tokens=101, append_eos=False, shard_tokens=50)
    assert all_tokens(tmp_path / "s") == expected_ids(bpe, DOCS, eos=False)[:101]


def test_corpus_split_routes_the_first_tokens_to_val(tmp_path, bpe):
    want = expected_ids(bpe, DOCS)
    idx = write_corpus_shards(iter(DOCS), bpe, tmp_path / "c", val_tokens=77, train_tokens=300, shard_tokens=64)
    assert all_tokens(tmp_path / "c" / "val") == want[:77]          # cut inside a document
    assert all_tokens(tmp_path / "c" / "train") == want[77:377]
    assert (idx["val"]["total_tokens"], idx["train"]["total_tokens"]) == (77, 300)
    # a separate held-out text: val is all of it, train all of the corpus
    write_corpus_shards(DOCS[:40], bpe, tmp_path / "d", val_tokens=None, val_texts=DOCS[40:])
    assert all_tokens(tmp_path / "d" / "val") == expected_ids(bpe, DOCS[40:])
    assert all_tokens(tmp_path / "d" / "train") == expected_ids(bpe, DOCS[:40])
    with pytest.raises(InputError, match="train split"):  # val took every token
        write_corpus_shards(DOCS, bpe, tmp_path / "e", val_tokens=10 ** 6)
    assert not (tmp_path / "e").exists()


def test_text_file_lines_give_the_whole_text_ids(tmp_path):
    """A .txt source is read line by line with newlines kept: with the char tokenizer the
    shards hold exactly the ids of the whole text (what the papers' tiny runs trained on)."""
    text = "".join(d + "\n" for d in DOCS) + "no final newline"
    (tmp_path / "c.txt").write_text(text)
    tok = train_tokenizer([text], "char")
    assert "".join(stream_texts(tmp_path / "c.txt")) == text
    write_shards(stream_texts(tmp_path / "c.txt"), tok, tmp_path / "s", append_eos=False, shard_tokens=100)
    assert all_tokens(tmp_path / "s") == tok(text, add_special_tokens=False)["input_ids"]


def test_joined_split_equals_slicing_the_joined_text(tmp_path):
    joined = "\n".join(DOCS)
    for budgets in ([100, None], [len(joined) // 2, 50, None], [5, 7]):
        paths = [tmp_path / f"p{i}.txt" for i in range(len(budgets))]
        sizes = write_joined_split(iter(DOCS), list(zip(paths, budgets)))
        cuts, pos = [], 0
        for b in budgets:
            cuts.append(joined[pos:] if b is None else joined[pos:pos + b])
            pos += len(cuts[-1])
        assert [p.read_text() for p in paths] == cuts and sizes == [len(c) for c in cuts]


# ------------------------------------------------------- (b) same batches as TokenStream ----
@pytest.mark.parametrize("shard_tokens", [7, 64, 1 << 20])
def test_sharded_batches_equal_token_stream(tmp_path, bpe, shard_tokens):
    seq = 16
    write_shards(DOCS, bpe, tmp_path / "s", shard_tokens=shard_tokens)
    tokens = expected_ids(bpe, DOCS)
    mem, sh = TokenStream(tokens, seq), ShardedTokenStream(tmp_path / "s", seq)
    assert len(sh) == len(mem) == len(tokens)
    crossing = 0
    for seed in (0, 1, 12345):
        for step in (0, 1, 2, 99, 10_000):
            a, b = sh.batch(step, 8, seed), mem.batch(step, 8, seed)
            assert a.keys() == b.keys() == {"input_ids", "labels"}
            for k in a:
                assert a[k].dtype == torch.long and torch.equal(a[k], b[k])
            # the windows really are the token ranges they claim, checked on the raw list
            g = torch.Generator().manual_seed(seed * 1_000_003 + step)
            for r, s in enumerate(torch.randint(0, len(tokens) - seq, (8,), generator=g).tolist()):
                assert a["input_ids"][r].tolist() == tokens[s:s + seq]
                assert a["labels"][r].tolist() == tokens[s + 1:s + seq + 1]
                crossing += s // shard_tokens != (s + seq) // shard_tokens
    if shard_tokens == 7:  # every window of 17 tokens spans 3+ shards of 7
        assert crossing == 3 * 5 * 8
        # a bounded number of shard files stays open, and the batches do not depend on it
        capped = ShardedTokenStream(tmp_path / "s", seq)
        capped.MAX_OPEN = 2
        for step in range(20):
            assert torch.equal(capped.batch(step, 8, 5)["input_ids"], mem.batch(step, 8, 5)["input_ids"])
            assert len(capped._fds) <= 2
        # a stream sent to another process (pickled) reopens its files there
        import pickle

        clone = pickle.loads(pickle.dumps(capped))
        assert torch.equal(clone.batch(3, 8, 1)["labels"], mem.batch(3, 8, 1)["labels"])
    for x, y in zip(sh.sequential_batches(4, 3), mem.sequential_batches(4, 3), strict=True):
        assert torch.equal(x["input_ids"], y["input_ids"]) and torch.equal(x["labels"], y["labels"])
    assert len(sh.sequential_batches(4, 10 ** 6)) == len(mem.sequential_batches(4, 10 ** 6))


# ------------------------------------------------------------- (c) pure in (seed, step) ----
def test_batches_are_pure_functions_of_seed_and_step(tmp_path, bpe):
    write_shards(DOCS, bpe, tmp_path / "s", shard_tokens=50)
    keys = [(s, t) for s in (0, 3) for t in (0, 5, 17)]
    first = {k: ShardedTokenStream(tmp_path / "s", 12).batch(k[1], 4, k[0]) for k in keys}
    other = ShardedTokenStream(tmp_path / "s", 12)
    for k in reversed(keys):  # another order, another instance
        assert torch.equal(other.batch(k[1], 4, k[0])["input_ids"], first[k]["input_ids"])
    assert not torch.equal(first[(0, 0)]["input_ids"], first[(0, 5)]["input_ids"])
    assert not torch.equal(first[(0, 0)]["input_ids"], first[(3, 0)]["input_ids"])


# ------------------------------------------------------------------- (d) uint16/uint32 ----
class FakeTokenizer:
    """A tokenizer whose vocabulary is `vocab` ids: word i of a text → id `base + i`."""

    def __init__(self, vocab: int, base: int):
        self.vocab, self.base, self.eos_token_id, self.name_or_path = vocab, base, vocab - 1, "fake"

    def __len__(self):
        return self.vocab

    def __call__(self, texts, add_special_tokens=False):
        assert isinstance(texts, list) and add_special_tokens is False
        return {"input_ids": [[self.base + int(w) for w in t.split()] for t in texts]}


@pytest.mark.parametrize("vocab,dtype,itemsize", [(300, "uint16", 2), (65_536, "uint16", 2),
                                                  (65_537, "uint32", 4), (200_000, "uint32", 4)])
def test_id_width_follows_vocabulary(tmp_path, vocab, dtype, itemsize):
    tok = FakeTokenizer(vocab, base=vocab - 20)
    docs = [" ".join(str(i % 19) for i in range(j, j + 9)) for j in range(30)]
    idx = write_shards(docs, tok, tmp_path / "s", shard_tokens=64)
    assert idx["dtype"] == dtype
    for s in idx["shards"]:
        assert (tmp_path / "s" / s["file"]).stat().st_size == itemsize * s["tokens"]
    want = [x for d in docs for x in [vocab - 20 + int(w) for w in d.split()] + [vocab - 1]]
    assert all_tokens(tmp_path / "s") == want and max(want) == vocab - 1


def test_id_outside_vocabulary_is_an_error(tmp_path):
    tok = FakeTokenizer(300, base=290)  # word "12" → id 302 ≥ 300
    with pytest.raises(InputError, match="302 is outside the tokenizer's vocabulary of 300"):
        write_shards(["1 12"], tok, tmp_path / "s")
    assert not (tmp_path / "s").exists()


# --------------------------------------------------------------- (e) damage and crashes ----
def _one_line(e: pytest.ExceptionInfo, *needles: str) -> None:
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


def test_damaged_directories_fail_naming_the_file(tmp_path, bpe):
    good = tmp_path / "s"
    idx = write_shards(DOCS, bpe, good, shard_tokens=100)
    assert len(idx["shards"]) >= 3
    with pytest.raises(InputError) as e:
        ShardedTokenStream(tmp_path / "nope", 8)
    _one_line(e, "nope")

    def damaged(name, edit):
        d = tmp_path / name
        d.mkdir()
        for f in good.iterdir():
            (d / f.name).write_bytes(f.read_bytes())
        edit(d)
        return d

    cases = {
        "no_index": (lambda d: (d / "index.json").unlink(), "index.json"),
        "missing": (lambda d: (d / "shard_00001.bin").unlink(), "shard_00001.bin"),
        "truncated": (lambda d: (d / "shard_00002.bin").write_bytes((d / "shard_00002.bin").read_bytes()[:-2]),
                      "shard_00002.bin"),
        "total": (lambda d: (d / "index.json").write_text(json.dumps({**idx, "total_tokens": idx["total_tokens"] + 5})),
                  "index.json"),
        "corrupt_json": (lambda d: (d / "index.json").write_text("{oops"), "index.json"),
    }
    for name, (edit, needle) in cases.items():
        with pytest.raises(InputError) as e:
            ShardedTokenStream(damaged(name, edit), 8)
        _one_line(e, name, needle)
    # same size, one byte flipped: only the sha256 check sees it
    flip = damaged("flipped", lambda d: (d / "shard_00000.bin").write_bytes(
        bytes([(d / "shard_00000.bin").read_bytes()[0] ^ 1]) + (d / "shard_00000.bin").read_bytes()[1:]))
    ShardedTokenStream(flip, 8)
    with pytest.raises(InputError) as e:
        ShardedTokenStream(flip, 8, verify=True)
    _one_line(e, "flipped", "shard_00000.bin", "sha256")
    with pytest.raises(InputError) as e:  # too short for one window
        ShardedTokenStream(good, idx["total_tokens"])
    _one_line(e, "shorter than seq_len")


def test_exception_mid_write_leaves_nothing(tmp_path, bpe):
    def docs():
        yield from DOCS * 20
        raise RuntimeError("source died")

    with pytest.raises(RuntimeError, match="source died"):
        write_shards(docs(), bpe, tmp_path / "out" / "s", shard_tokens=64, batch_docs=16)
    assert list((tmp_path / "out").iterdir()) == []  # no output, no temporary directory left
    with pytest.raises(RuntimeError):
        write_corpus_shards(docs(), bpe, tmp_path / "out" / "c", val_tokens=100, shard_tokens=64)
    assert list((tmp_path / "out").iterdir()) == []


# --------------------------------------------------------------------------- (f) the CLI ----
def run_cli(*argv) -> int:
    return cli.main(build_parser(), ["shards", *map(str, argv)])


def test_cli_on_jsonl_and_saved_dataset(tmp_path, bpe_dir, bpe, capsys):
    import datasets

    rows = [{"text": d, "id": i} for i, d in enumerate(DOCS)]
    write_jsonl(tmp_path / "c.jsonl", rows)
    want = expected_ids(bpe, DOCS)
    assert run_cli("--source", tmp_path / "c.jsonl", "--tokenizer", bpe_dir, "--val-tokens", 40,
                   "--train-tokens", 250, "--shard-tokens", 100, "--out", tmp_path / "j") == 0
    assert all_tokens(tmp_path / "j" / "val") == want[:40]
    assert all_tokens(tmp_path / "j" / "train") == want[40:290]
    assert read_index(tmp_path / "j" / "train")["tokenizer"] == str(bpe_dir)

    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:45]),
                          "test": datasets.Dataset.from_list(rows[45:])}).save_to_disk(str(tmp_path / "dd"))
    assert run_cli("--source", tmp_path / "dd", "--split", "train", "--val-source", tmp_path / "dd",
                   "--val-split", "test", "--tokenizer", bpe_dir, "--out", tmp_path / "d") == 0
    assert all_tokens(tmp_path / "d" / "val") == expected_ids(bpe, DOCS[45:])
    assert all_tokens(tmp_path / "d" / "train") == expected_ids(bpe, DOCS[:45])
    # the same corpus from the two formats: the same tokens
    assert run_cli("--source", tmp_path / "dd", "--tokenizer", bpe_dir, "--val-tokens", 40,
                   "--out", tmp_path / "d2") == 0
    assert all_tokens(tmp_path / "d2" / "val") == want[:40]
    assert all_tokens(tmp_path / "d2" / "train") == expected_ids(bpe, DOCS[:45])[40:]

    capsys.readouterr()
    for argv, needle in [(("--source", tmp_path / "c.jsonl", "--text-field", "body", "--val-tokens", 5), "'body'"),
                         (("--source", tmp_path / "dd", "--split", "validation", "--val-tokens", 5), "validation"),
                         (("--source", tmp_path / "c.jsonl"), "--val-tokens")]:
        assert run_cli(*argv, "--tokenizer", bpe_dir, "--out", tmp_path / "bad") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
        assert not (tmp_path / "bad").exists()
