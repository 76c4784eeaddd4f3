"""Data: deterministic generators, record readers, and the batchers the trainer consumes.

Batches are pure functions of (seed, step): resuming at step k draws exactly the batches an
uninterrupted run draws from step k on, with no sampler state to checkpoint.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable, Sequence

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
def load_records(source: str | Path, split: str = "train") -> list[dict]:
    """Records from a local JSONL file, a `datasets.save_to_disk` directory, or a hub id.

    Tiny scales pass generated JSONL; paper scale passes a hub id (needs the network) and the
    same code path, `datasets.load_dataset`, is exercised in tests on local directories.
    """
    p = Path(source)
    if p.suffix == ".jsonl":
        return read_jsonl(p)
    import datasets

    if p.is_dir() and any((p / f).exists() for f in ("dataset_info.json", "dataset_dict.json")):
        ds = datasets.load_from_disk(str(p))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise InputError(f"{p} has no split {split!r} (has {sorted(ds)})")
            ds = ds[split]
        return ds.to_list()
    if p.exists():
        raise InputError(f"not a JSONL file or saved dataset: {p}")
    try:
        return datasets.load_dataset(str(source), split=split).to_list()
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot load dataset {source!r} split {split!r}: {str(e).splitlines()[0]}") from None


def iter_texts(source: str | Path, field: str, max_chars: int, split: str = "train"):
    """Texts from a corpus until `max_chars` characters: a local JSONL/saved dataset, or a hub
    id streamed (a pretraining corpus is far larger than what one run reads)."""
    p = Path(source)
    if p.exists():
        rows = iter(load_records(p, split))
    else:
        import datasets

        try:
            rows = iter(datasets.load_dataset(str(source), split=split, streaming=True))
        except Exception as e:
            raise InputError(f"cannot stream dataset {source!r}: {str(e).splitlines()[0]}") from None
    n = 0
    for r in rows:
        if n >= max_chars:
            return
        if field not in r:
            raise InputError(f"dataset {source} has no field {field!r}")
        n += len(r[field]) + 1
        yield r[field]


# ----------------------------------------------------------------------- batchers ----
def _step_generator(seed: int, step: int):
    import torch

    # distinct, reproducible stream per (seed, step); the constant decorrelates nearby seeds
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


class TokenStream:
    """A long token sequence; a batch is `batch_size` random windows of `seq_len + 1` tokens."""

    def __init__(self, tokens: Sequence[int], seq_len: int):
        import torch

        self.tokens = torch.as_tensor(tokens, dtype=torch.long)
        self.seq_len = seq_len
        if len(self.tokens) < seq_len + 1:
            raise InputError(f"token stream of {len(self.tokens)} tokens is shorter than seq_len {seq_len}")

    @classmethod
    def from_text(cls, text: str, tokenizer, seq_len: int) -> "TokenStream":
        return cls(tokenizer(text, add_special_tokens=False)["input_ids"], seq_len)

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        import torch

        g = _step_generator(seed, step)
        starts = torch.randint(0, len(self.tokens) - self.seq_len, (batch_size,), generator=g)
        idx = starts[:, None] + torch.arange(self.seq_len + 1)
        win = self.tokens[idx]
        return {"input_ids": win[:, :-1], "labels": win[:, 1:]}

    def sequential_batches(self, batch_size: int, max_batches: int) -> list[dict]:
        """Fixed, non-overlapping windows from the start: the evaluation set of a stream."""
        import torch

        n = min(max_batches * batch_size, (len(self.tokens) - 1) // self.seq_len)
        out = []
        for b0 in range(0, n, batch_size):
            rows = torch.arange(b0, min(b0 + batch_size, n))
            idx = rows[:, None] * self.seq_len + torch.arange(self.seq_len + 1)
            win = self.tokens[idx]
            out.append({"input_ids": win[:, :-1], "labels": win[:, 1:]})
        return out


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
        self.pad_id = tokenizer.pad_token_id

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

