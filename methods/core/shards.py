"""Token shards: a corpus tokenized once into fixed-size files on disk, read by (seed, step).

At paper scale a pretraining corpus is 10^11 characters, far more than one job's memory, so
it is never held whole: `write_shards` streams documents through the tokenizer in chunks and
appends each chunk's ids to the open shard file; `ShardedTokenStream` reads only the windows
it draws, from disk, and draws the same windows as `methods.core.data.TokenStream` would on
the same tokens (the window choice lives in their shared base class `WindowStream`), so a run
reads identical batches whichever of the two holds its tokens.

A shard directory holds `shard_00000.bin`, `shard_00001.bin`, ... (raw little-endian uint16
when every id fits, else uint32; the concatenation of the files is the token stream) and
`index.json` (dtype, tokens per shard, total tokens, vocabulary size, tokenizer, the sha256 of
each shard). The index is written last and the whole directory is moved into place at once,
so an interrupted write leaves nothing that looks complete.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .data import WindowStream
from .results import InputError, atomic_path

FORMAT = 1
INDEX = "index.json"
# explicit byte order: the files are read on other machines than the one that wrote them
DTYPES = {"uint16": "<u2", "uint32": "<u4"}


def token_dtype(vocab_size: int) -> str:
    """uint16 when every id (< vocab_size) fits in 16 bits, else uint32."""
    return "uint16" if vocab_size <= 2 ** 16 else "uint32"


def encode_texts(texts: Iterable[str], tokenizer, *, append_eos: bool = True,
                 batch_docs: int = 1024) -> Iterator[np.ndarray]:
    """Token ids of `texts`, `batch_docs` documents per tokenizer call (the fast tokenizer
    encodes a list in parallel), as one int64 array per call; the tokenizer's EOS id after
    each document when `append_eos` and the tokenizer has one."""
    eos = tokenizer.eos_token_id if append_eos else None
    batch: list[str] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"document {i} is a {type(text).__name__}, not a string")
        batch.append(text)
        if len(batch) == batch_docs:
            yield _encode_batch(batch, tokenizer, eos)
            batch = []
    if batch:
        yield _encode_batch(batch, tokenizer, eos)


def _encode_batch(batch: list[str], tokenizer, eos: int | None) -> np.ndarray:
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a transformers fast tokenizer's
    if hasattr(backend, "encode_batch_fast"):
        # the ids `tokenizer(batch)` returns (transformers calls backend.encode_batch), without
        # computing offsets: 1.4x the throughput here, which matters at 10^11 tokens
        ids = [e.ids for e in backend.encode_batch_fast(batch, add_special_tokens=False)]
    else:
        ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
    if eos is not None:
        for x in ids:
            x.append(eos)
    return np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=sum(map(len, ids)))


class _Chunks:
    """A stream of token arrays that can be cut at exact token counts: `take(n)` yields the
    next n tokens (all that remain when n is None) and keeps the rest of a cut array for the
    next call, so one pass over the corpus can fill the val split and then the train split."""

    def __init__(self, chunks: Iterable[np.ndarray]):
        self._it = iter(chunks)
        self._pending: np.ndarray | None = None

    def take(self, n: int | None) -> Iterator[np.ndarray]:
        while n is None or n > 0:
            if self._pending is not None:
                a, self._pending = self._pending, None
            else:
                a = next(self._it, None)
            if a is None:
                return
            if n is not None and len(a) > n:
                a, self._pending = a[:n], a[n:]
            if n is not None:
                n -= len(a)
            yield a


class _ShardWriter:
    """Appends each chunk of ids to the open shard file (hashing as it goes) and starts the
    next file when a shard is full: memory is one tokenizer batch, whatever the corpus size
    and the shard size."""

    def __init__(self, out_dir: Path, dtype: str, vocab_size: int, shard_tokens: int):
        if shard_tokens < 1:
            raise InputError(f"shard_tokens must be positive, got {shard_tokens}")
        self.out_dir, self.dtype, self.vocab_size, self.shard_tokens = out_dir, dtype, vocab_size, shard_tokens
        self.shards: list[dict] = []
        self._f = self._hash = None
        self._n = 0

    def add(self, ids: np.ndarray) -> None:
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise InputError(f"token id {bad} is outside the tokenizer's vocabulary of {self.vocab_size}")
        data = ids.astype(DTYPES[self.dtype])
        while data.size:
            if self._f is None:
                self._f = open(self.out_dir / f"shard_{len(self.shards):05d}.bin", "wb")
                self._hash, self._n = hashlib.sha256(), 0
            k = min(data.size, self.shard_tokens - self._n)
            raw = data[:k].view(np.uint8)
            self._f.write(raw)
            self._hash.update(raw)
            self._n += k
            data = data[k:]
            if self._n == self.shard_tokens:
                self.close()

    def close(self) -> None:
        """Finish the open shard (if any) and record it."""
        if self._f is None:
            return
        self._f.close()
        self.shards.append({"file": Path(self._f.name).name, "tokens": self._n, "sha256": self._hash.hexdigest()})
        self._f = None


def _write_split(chunks: Iterable[np.ndarray], tokenizer, out_dir: Path, shard_tokens: int,
                 append_eos: bool, label: str) -> dict:
    """Shards + index.json into `out_dir` (a fresh directory inside an atomic write);
    `label` names the output in errors (out_dir is a temporary path)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = len(tokenizer)
    dtype = token_dtype(vocab)
    w = _ShardWriter(out_dir, dtype, vocab, shard_tokens)
    try:
        for a in chunks:
            w.add(a)
    finally:
        w.close()
    total = sum(s["tokens"] for s in w.shards)
    if not total:
        raise InputError(f"no tokens for {label}: the corpus ran out before it")
    index = {"format": FORMAT, "generated_by": "methods.core.shards.write_shards",
             "dtype": dtype, "vocab_size": vocab, "tokenizer": getattr(tokenizer, "name_or_path", None),
             "eos_id": tokenizer.eos_token_id if append_eos else None, "shard_tokens": shard_tokens,
             "total_tokens": total, "shards": w.shards}
    # written last: a directory without its index is incomplete by construction
    (out_dir / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def write_shards(texts: Iterable[str], tokenizer, out_dir: str | Path, *, shard_tokens: int = 2 ** 24,
                 max_tokens: int | None = None, append_eos: bool = True, batch_docs: int = 1024) -> dict:
    """Tokenize `texts` (streamed) into shards of `shard_tokens` tokens in `out_dir`, at most
    `max_tokens` tokens (None: the whole corpus; the last document may be cut). Returns the
    index."""
    chunks = _Chunks(encode_texts(texts, tokenizer, append_eos=append_eos, batch_docs=batch_docs))
    with atomic_path(out_dir, is_dir=True) as tmp:
        return _write_split(chunks.take(max_tokens), tokenizer, tmp, shard_tokens, append_eos, str(out_dir))


def write_corpus_shards(texts: Iterable[str], tokenizer, out_dir: str | Path, *, val_tokens: int | None,
                        train_tokens: int | None = None, val_texts: Iterable[str] | None = None,
                        shard_tokens: int = 2 ** 24, append_eos: bool = True,
                        batch_docs: int = 1024) -> dict[str, dict]:
    """A train/val pair of shard directories, `out_dir/val` and `out_dir/train`, written
    together atomically. Without `val_texts`, one pass over `texts`: its first `val_tokens`
    tokens are the validation split and the next `train_tokens` (None: the rest) the training
    split. With `val_texts` (a separate held-out text), val is its first `val_tokens` tokens
    (None: all) and train the first `train_tokens` of `texts`. Returns {"val": index, "train": index}."""
    if val_texts is None and val_tokens is None:
        raise InputError("val_tokens is required when the validation split is cut from the corpus")
    for name, n in (("val_tokens", val_tokens), ("train_tokens", train_tokens)):
        if n is not None and n < 1:
            raise InputError(f"{name} must be positive, got {n}")
    enc = dict(append_eos=append_eos, batch_docs=batch_docs)
    train = _Chunks(encode_texts(texts, tokenizer, **enc))
    val = train if val_texts is None else _Chunks(encode_texts(val_texts, tokenizer, **enc))
    out = {}
    with atomic_path(out_dir, is_dir=True) as tmp:
        for name, src, n in (("val", val, val_tokens), ("train", train, train_tokens)):
            out[name] = _write_split(src.take(n), tokenizer, tmp / name, shard_tokens, append_eos,
                                     f"the {name} split of {out_dir}")
    return out


# ------------------------------------------------------------------------- reading ----
def read_index(path: str | Path, verify: bool = False) -> dict:
    """The index of a shard directory, checked against the files: every shard present with
    the size the index gives, the sizes summing to `total_tokens`; with `verify`, each
    shard's sha256 too. Any mismatch is an InputError naming the file."""
    d = Path(path)
    if not d.is_dir():
        raise InputError(f"missing token shard directory: {d}")
    f = d / INDEX
    if not f.is_file():
        raise InputError(f"missing shard index (incomplete or not a shard directory): {f}")
    try:
        index = json.loads(f.read_text())
        dtype = np.dtype(DTYPES[index["dtype"]])
        shards, total = index["shards"], int(index["total_tokens"])
        sizes = [int(s["tokens"]) for s in shards]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise InputError(f"corrupt shard index {f}: {type(e).__name__}: {e}") from None
    if index.get("format") != FORMAT:
        raise InputError(f"shard index {f} has format {index.get('format')!r}, this code reads {FORMAT}")
    for s, n in zip(shards, sizes):
        p = d / s["file"]
        if not p.is_file():
            raise InputError(f"missing token shard: {p}")
        if p.stat().st_size != n * dtype.itemsize:
            raise InputError(f"token shard {p} has {p.stat().st_size} bytes, the index says {n} tokens "
                             f"× {dtype.itemsize} bytes (truncated or replaced)")
        if verify and _sha256(p) != s["sha256"]:
            raise InputError(f"token shard {p} fails its sha256 check (corrupt)")
    if sum(sizes) != total:
        raise InputError(f"shard index {f} says {total} tokens but its shards hold {sum(sizes)}")
    return index


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


class ShardedTokenStream(WindowStream):
    """The token stream of a shard directory (the shards concatenated). A window's tokens are
    read from disk when it is drawn, with positional reads (`os.pread`) into a fresh array:
    memory is one batch, whatever the corpus size and however many batches a run draws.
    (A `numpy.memmap` was measured to keep every page it touched in the process's resident
    set: 3,200 random windows of a 33 MB shard mapped the whole file, and madvise(RANDOM)
    did not change that.) Batches are `WindowStream`'s, the same as `TokenStream(tokens,
    seq_len)`'s; a window may span shards."""

    MAX_OPEN = 64  # shard files kept open (a paper-scale corpus has thousands of shards)

    def __init__(self, path: str | Path, seq_len: int, verify: bool = False):
        self._fds: OrderedDict[int, int] = OrderedDict()  # shard → open descriptor, least recent first
        self.path = Path(path)
        self.seq_len = seq_len
        self.index = read_index(self.path, verify)
        self._dtype = np.dtype(DTYPES[self.index["dtype"]])
        self._files = [self.path / s["file"] for s in self.index["shards"]]
        self._offsets = np.cumsum([0] + [int(s["tokens"]) for s in self.index["shards"]])
        self._check_length()

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def _fd(self, i: int) -> int:
        """An open descriptor of shard i, opened on first use (a job that reads one shard opens one)."""
        if i in self._fds:
            self._fds.move_to_end(i)
        else:
            if len(self._fds) >= self.MAX_OPEN:
                os.close(self._fds.popitem(last=False)[1])
            self._fds[i] = os.open(self._files[i], os.O_RDONLY)
        return self._fds[i]

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])

    def __del__(self):
        self.close()

    def __getstate__(self):  # descriptors do not travel to other processes; they reopen
        return {**self.__dict__, "_fds": OrderedDict()}

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) of the stream as int64, across shard boundaries."""
        if not 0 <= start <= stop <= len(self):
            raise IndexError(f"token range [{start}, {stop}) outside a stream of {len(self)}")
        out = np.empty(stop - start, dtype=np.int64)
        i = int(np.searchsorted(self._offsets, start, side="right")) - 1
        pos, size = start, self._dtype.itemsize
        while pos < stop:
            lo = pos - int(self._offsets[i])
            hi = min(stop, int(self._offsets[i + 1])) - int(self._offsets[i])
            raw = os.pread(self._fd(i), (hi - lo) * size, lo * size)
            if len(raw) != (hi - lo) * size:  # the file shrank after the index was checked
                raise InputError(f"token shard {self._files[i]} is shorter than its index says")
            out[pos - start: pos - start + hi - lo] = np.frombuffer(raw, dtype=self._dtype)
            pos += hi - lo
            i += 1
        return out

    def _windows(self, starts):
        import torch

        n, size = self.seq_len + 1, self._dtype.itemsize
        starts = starts.numpy()
        shard = np.searchsorted(self._offsets, starts, side="right") - 1
        out = np.empty((len(starts), n), dtype=np.int64)
        for r, (s, i) in enumerate(zip(starts.tolist(), shard.tolist())):
            lo = s - int(self._offsets[i])
            if s + n <= self._offsets[i + 1]:  # the common case: one read from one shard
                raw = os.pread(self._fd(i), n * size, lo * size)
                if len(raw) != n * size:
                    raise InputError(f"token shard {self._files[i]} is shorter than its index says")
                out[r] = np.frombuffer(raw, dtype=self._dtype)
            else:
                out[r] = self.read(s, s + n)
        return torch.from_numpy(out)
