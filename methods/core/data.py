"""Data: deterministic generators, record readers, and the batchers the trainer consumes.

Batches are pure functions of (seed, step): resuming at step k draws exactly the batches an
uninterrupted run draws from step k on, with no sampler state to checkpoint.
"""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .results import InputError, read_jsonl

# ---------------------------------------------------------------- generators (shared) ----
_PCFG = {
    "S": [["NP", "VP", "."]],
    "NP": [["the", "N"], ["a", "ADJ", "N"], ["the", "N", "PP"]],
    "VP": [["V", "NP"], ["V"], ["V", "PP"]],
    "PP": [["near", "NP"], ["under", "NP"]],
    "N": [["cat"], ["dog"], ["bird"], ["tree"], ["house"], ["river"]],
    "V": [["sees"], ["likes"], ["finds"], ["sleeps"]],
    "ADJ": [["small"], ["red"], ["old"], ["quiet"]],
}


def pcfg_sentence(rng: random.Random, symbol: str = "S", depth: int = 0) -> str:
    """One sentence from a small probabilistic CFG (uniform rules; recursion capped at depth 4)."""
    rules = _PCFG[symbol]
    rule = rules[0] if depth > 4 else rng.choice(rules)
    words = []
    for s in rule:
        words.append(pcfg_sentence(rng, s, depth + 1) if s in _PCFG else s)
    return " ".join(words).replace(" .", ".")


def arithmetic_line(rng: random.Random, max_operand: int = 100) -> str:
    a, b = rng.randrange(max_operand), rng.randrange(max_operand)
    return f"{a}+{b}={a + b}."


# ------------------------------------------------------------------------ readers ----
def _is_saved_dataset(p: Path) -> bool:
    return p.is_dir() and any((p / f).exists() for f in ("dataset_info.json", "dataset_dict.json"))


def _load_saved(p: Path, split: str):
    """One split of a `datasets.save_to_disk` directory (a Dataset is its own `train`)."""
    import datasets

    ds = datasets.load_from_disk(str(p))
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise InputError(f"{p} has no split {split!r} (has {sorted(ds)})")
        ds = ds[split]
    return ds


def load_records(source: str | Path, split: str = "train") -> list[dict]:
    """Records from a local JSONL file, a `datasets.save_to_disk` directory, or a hub id.

    Tiny scales pass generated JSONL; paper scale passes a hub id (needs the network) and the
    same code path, `datasets.load_dataset`, is exercised in tests on local directories.
    """
    p = Path(source)
    if p.suffix == ".jsonl":
        return read_jsonl(p)
    import datasets

    if _is_saved_dataset(p):
        return _load_saved(p, split).to_list()
    if p.exists() and not (p.is_dir() and any(f.is_file() for f in p.rglob("*"))):
        raise InputError(f"not a JSONL file or saved dataset, nor a dataset directory with data files: {p}")
    # a hub id, or a local directory laid out like a hub dataset repository (data files, and
    # a README whose `configs:` name the splits): the same `load_dataset` call serves both
    try:
        return datasets.load_dataset(str(source), split=split).to_list()
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot load dataset {source!r} split {split!r}: {str(e).splitlines()[0]}") from None


def stream_texts(source: str | Path, field: str = "text", split: str = "train") -> Iterator[str]:
    """Texts of a corpus, one at a time, never the whole corpus in memory: a plain .txt file
    line by line (each line keeps its newline, so the lines concatenate to the file), a JSONL
    file line by line, a `save_to_disk` directory in Arrow batches (memory-mapped), or a hub
    id streamed (a pretraining corpus is far larger than the memory of one job)."""
    p = Path(source)
    if p.suffix == ".txt":
        if not p.is_file():
            raise InputError(f"missing input file: {p}")
        with open(p, encoding="utf-8") as f:
            yield from f
        return
    if p.suffix == ".jsonl":
        if not p.is_file():
            raise InputError(f"missing input file: {p}")
        with open(p, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"corrupt JSONL in {p} line {i}: {e}") from None
                if field not in r:
                    raise InputError(f"{p} line {i} has no field {field!r}")
                yield r[field]
        return
    import datasets

    if _is_saved_dataset(p):
        ds = _load_saved(p, split)
        if field not in ds.column_names:
            raise InputError(f"dataset {p} has no field {field!r} (has {ds.column_names})")
        for b in ds.select_columns([field]).iter(batch_size=1024):
            yield from b[field]
        return
    if p.exists() and not p.is_dir():
        raise InputError(f"not a .txt file, JSONL file or saved dataset: {p}")
    # a hub id, or a local directory laid out like a hub dataset repository, as in load_records
    try:
        rows = iter(datasets.load_dataset(str(source), split=split, streaming=True))
        # a streamed dataset opens its files on the first row: fetch it here so that a bad
        # source fails as one line too
        first = next(rows, None)
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot stream dataset {source!r}: {str(e).splitlines()[0]}") from None
    for r in itertools.chain([] if first is None else [first], rows):
        if field not in r:
            raise InputError(f"dataset {source} has no field {field!r}")
        yield r[field]


def dataset_splits(source: str | Path, subset: str | None = None) -> list[str]:
    """The split names a dataset publishes: a saved dataset's, a local hub-layout directory's
    or a hub id's (`datasets.get_dataset_split_names`); a JSONL file is one `train` split."""
    p = Path(source)
    if p.suffix == ".jsonl":
        return ["train"]
    import datasets

    if p.is_dir() and (p / "dataset_dict.json").exists():
        return sorted(datasets.load_from_disk(str(p)))
    if p.is_dir() and (p / "dataset_info.json").exists():
        return ["train"]
    try:
        return list(datasets.get_dataset_split_names(str(source), subset))
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot list the splits of dataset {source!r}: {str(e).splitlines()[0]}") from None


def iter_texts(source: str | Path, field: str, max_chars: int, split: str = "train") -> Iterator[str]:
    """`stream_texts` until `max_chars` characters (each text counted with one separator)."""
    n = 0
    for text in stream_texts(source, field, split):
        if n >= max_chars:
            return
        n += len(text) + 1
        yield text


def write_joined_split(texts: Iterable[str], parts: Sequence[tuple[str | Path, int | None]]) -> list[int]:
    """Write `"\n".join(texts)` cut into consecutive files: `parts` = [(path, n_chars), ...],
    the last n_chars may be None (the rest). Streams, so the joined text never exists in
    memory; the files equal slicing the joined string at the cumulative budgets. Returns the
    characters written per file."""
    files = [open(path, "w", encoding="utf-8") for path, _ in parts]
    sizes = [0] * len(parts)
    k = 0
    try:
        for i, text in enumerate(texts):
            piece = text if i == 0 else "\n" + text
            while piece:
                budget = parts[k][1]
                room = len(piece) if budget is None else budget - sizes[k]
                if room <= 0 and k + 1 < len(parts):
                    k += 1
                    continue
                if room <= 0:  # every budget is full
                    return sizes
                files[k].write(piece[:room])
                sizes[k] += min(room, len(piece))
                piece = piece[room:]
    finally:
        for f in files:
            f.close()
    return sizes


# ----------------------------------------------------------------------- batchers ----
def _step_generator(seed: int, step: int):
    import torch

    # distinct, reproducible stream per (seed, step); the constant decorrelates nearby seeds
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


class WindowStream:
    """A long token sequence read as windows of `seq_len + 1` tokens. Subclasses say how
    windows are gathered (`_windows`); which windows a batch holds is decided here only, so
    every stream with the same tokens draws the same batches (and resume stays exact)."""

    seq_len: int

    def __len__(self) -> int:
        raise NotImplementedError

    def _windows(self, starts):
        """[len(starts), seq_len + 1] long tensor: the tokens from each start."""
        raise NotImplementedError

    def _check_length(self) -> None:
        if len(self) < self.seq_len + 1:
            raise InputError(f"token stream of {len(self)} tokens is shorter than seq_len {self.seq_len}")

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        """`batch_size` random windows, a pure function of (seed, step)."""
        import torch

        g = _step_generator(seed, step)
        starts = torch.randint(0, len(self) - self.seq_len, (batch_size,), generator=g)
        win = self._windows(starts)
        return {"input_ids": win[:, :-1], "labels": win[:, 1:]}

    def sequential_batches(self, batch_size: int, max_batches: int) -> list[dict]:
        """Fixed, non-overlapping windows from the start: the evaluation set of a stream."""
        import torch

        n = min(max_batches * batch_size, (len(self) - 1) // self.seq_len)
        out = []
        for b0 in range(0, n, batch_size):
            win = self._windows(torch.arange(b0, min(b0 + batch_size, n)) * self.seq_len)
            out.append({"input_ids": win[:, :-1], "labels": win[:, 1:]})
        return out


class TokenStream(WindowStream):
    """A token sequence held in memory (a long tensor); batches as `WindowStream`. For a corpus
    that does not fit in memory, write shards once and read them with
    `methods.core.shards.ShardedTokenStream` (the same batches for the same tokens)."""

    def __init__(self, tokens: Sequence[int], seq_len: int):
        import torch

        self.tokens = torch.as_tensor(tokens, dtype=torch.long)
        self.seq_len = seq_len
        self._check_length()

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def from_text(cls, text: str, tokenizer, seq_len: int) -> "TokenStream":
        return cls(tokenizer(text, add_special_tokens=False)["input_ids"], seq_len)

    def _windows(self, starts):
        import torch

        return self.tokens[starts[:, None] + torch.arange(self.seq_len + 1)]


def encode_prompt_answer(tokenizer, prompt: str, answer: str, end: str = "") -> tuple[list[int], int]:
    """Token ids of prompt+answer+end and the index where the answer starts, split the way
    lm-eval splits a loglikelihood request, so that SFT trains on and `answer_nll` scores
    exactly the tokens lm-eval scores: the context's trailing whitespace moves into the
    continuation (lm-eval's `_encode_pair`), and the whole string is encoded once and cut at
    the context's length."""
    if not prompt.strip():
        raise InputError(f"empty prompt for answer {answer!r}")
    n = len(prompt) - len(prompt.rstrip())
    if n:
        prompt, answer = prompt[:-n], prompt[-n:] + answer
    whole = tokenizer(prompt + answer + end, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return whole, len(ctx)


class PromptAnswerBatches:
    """Supervised fine-tuning batches: loss on the answer tokens only (labels -100 elsewhere)."""

    def __init__(self, pairs: Iterable[tuple[str, str]], tokenizer, end: str = ""):
        self.items = [encode_prompt_answer(tokenizer, p, a, end) for p, a in pairs]
        if not self.items:
            raise InputError("no prompt/answer pairs to train on")
        from .tokenizer import ensure_pad

        # the pad id only fills masked positions (labels -100, attention 0); Llama-3 has no
        # pad token, so its eos serves (ensure_pad), and a tokenizer with neither is an error
        self.pad_id = ensure_pad(tokenizer)

    def collate(self, rows: list[int]) -> dict:
        import torch

        width = max(len(self.items[r][0]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            toks, start = self.items[r]
            ids[i, : len(toks)] = torch.tensor(toks)
            mask[i, : len(toks)] = 1
            # position t predicts token t+1: the answer tokens are targets of positions start-1..
            labels[i, start - 1 : len(toks) - 1] = torch.tensor(toks[start:])
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        import torch

        rows = torch.randint(0, len(self.items), (batch_size,), generator=_step_generator(seed, step))
        return self.collate(rows.tolist())

    def sequential_batches(self, batch_size: int, max_batches: int | None = None) -> list[dict]:
        n = len(self.items) if max_batches is None else min(len(self.items), max_batches * batch_size)
        return [self.collate(list(range(b, min(b + batch_size, n)))) for b in range(0, n, batch_size)]

