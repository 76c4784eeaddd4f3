"""The tiny world of the LFQ study (arXiv 2605.29756; our design): PCFG sentences (for perplexity) mixed with a
running-sum task where an early error propagates to every later output digit.

Running sum (our variant, see README): "s37" → "0774…": every output digit is the sum of the
two digits before it, mod 10 (x_t = x_{t−1} + x_{t−2} mod 10, Fibonacci mod 10), seeded by the
prompt's two digits. Our planned input-driven form ("in 3 7 2 …; out 3 0 2 …") needs the model
to find input t ~35 characters back; our 0.86M-parameter model learned neither that nor a
three-term sum in the planned 300 steps (greedy EM 0.0 at every length), so the sum runs over
the model's own last two outputs: the rule is local (learnable in 300 steps) and one flipped
digit still corrupts every later one (an early error propagates, mimicking long
generations). The length buckets 10/20/30 score the first k of `n_digits` generated digits.
With two seed digits there are only 100 prompts, all of them chains seen in training: the
evaluation measures whether quantization preserves what the FP model computes, not
generalisation.

Writes train.txt, val.txt (PCFG + running-sum lines), calib.txt (the calibration corpus,
drawn like the training text but with its own seed), sum_eval.jsonl (the evaluation
seeds, see above) and tokenizer/.
"""
from __future__ import annotations

import random
from pathlib import Path

from methods.core.data import pcfg_sentence
from methods.core.results import InputError, atomic_path, write_jsonl

from .config import CalibConfig, DataConfig

SEED_DIGITS = 2


def running_sum(seed: str, n: int) -> str:
    """The `n` digits after `seed`: each the sum of the previous two, mod 10."""
    xs = [int(c) for c in seed]
    for _ in range(n):
        xs.append(sum(xs[-SEED_DIGITS:]) % 10)
    return "".join(map(str, xs[len(seed):]))


def prompt(seed: str) -> str:
    return f"s{seed}"


def corpus(rng: random.Random, n_chars: int, cfg: DataConfig) -> str:
    lines, n = [], 0
    while n < n_chars:
        if rng.random() < cfg.sum_fraction:
            d = "".join(rng.choice("0123456789") for _ in range(SEED_DIGITS))
            line = prompt(d) + running_sum(d, cfg.n_digits)
        else:
            line = pcfg_sentence(rng)
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines) + "\n"


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    from methods.core.tokenizer import train_tokenizer

    rng = random.Random(cfg.seed)
    evals = set()
    if cfg.n_eval > 10 ** SEED_DIGITS:
        raise InputError(f"config key 'n_eval': {cfg.n_eval} exceeds the {10 ** SEED_DIGITS} possible seeds")
    while len(evals) < cfg.n_eval:
        evals.add("".join(rng.choice("0123456789") for _ in range(SEED_DIGITS)))
    evals = sorted(evals)
    rng.shuffle(evals)
    with atomic_path(out_dir, is_dir=True) as tmp:
        texts = {}
        for i, (name, n) in enumerate((("train", cfg.train_chars), ("val", cfg.val_chars),
                                       ("calib", cfg.calib_chars))):
            texts[name] = corpus(random.Random(cfg.seed * 1000 + i + 1), n, cfg)
            (tmp / f"{name}.txt").write_text(texts[name])
        write_jsonl(tmp / "sum_eval.jsonl",
                    [{"prompt": prompt(d), "answer": running_sum(d, cfg.n_digits)} for d in evals])
        # the char vocabulary of every split (calibration text included) plus the specials
        tok = train_tokenizer(list(texts.values()), "char")
        tok.save_pretrained(tmp / "tokenizer")
        sizes = {k: len(v) for k, v in texts.items()} | {"vocab": len(tok), "n_eval": len(evals)}
    return sizes


def calibration_ids(cfg: CalibConfig, data_dir: str | Path, tokenizer):
    """[n_samples, seq_len] token ids: random windows of the calibration text (seeded)."""
    import torch

    if cfg.source == "generated":
        text = (Path(data_dir) / "calib.txt").read_text()
    else:
        import datasets

        try:
            ds = datasets.load_dataset(cfg.source, cfg.subset, split=cfg.split)
        except Exception as e:  # hub errors come in many types; one line is enough
            raise InputError(f"cannot load calibration set {cfg.source!r}: {str(e).splitlines()[0]}") from None
        text = "\n\n".join(ds[cfg.text_field])
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
    if len(ids) <= cfg.seq_len:
        raise InputError(f"calibration text has {len(ids)} tokens, fewer than seq_len {cfg.seq_len}")
    g = torch.Generator().manual_seed(cfg.seed)
    starts = torch.randint(0, len(ids) - cfg.seq_len, (cfg.n_samples,), generator=g)
    return ids[starts[:, None] + torch.arange(cfg.seq_len)]
