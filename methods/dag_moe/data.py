"""Tiny data for DAG-MoE (our design): a word-level mixture corpus where two-step composition should help.

* C1 function composition: `n_functions` random permutations f1..f12 of Z_m (m = 17) plus the
  identity "I"; the segment "f3 f7 5 = y" has y = f3(f7(5)) (the outer function is written first).
  A fraction `heldout_frac` of the (f, g) pairs of two non-identity functions never appears in
  LM training (pairs with "I" are the single-function examples and always train); the held-out
  split is reported, not asserted (a pilot run generalised to none).
* C2 modular chains: "( a + b ) * c mod 17 = y", y = (a + b)·c mod 17.
* C3 PCFG filler text (`methods.core.data.pcfg_sentence`), about `mix_c3` of the tokens.
Segments end with ";"; a training row is whole segments concatenated from a segment start and
cut at seq_len + 1 tokens. Rows are generated on the fly: a batch is a pure function of
(seed, step) (streamed from the generator), the world (permutations, held-out pairs,
segment probabilities) is fixed by `seed` and written once by the data step.
The vocabulary is closed (about 60 words), so the tokenizer is a fixed WordLevel map.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

from methods.core.data import _PCFG, pcfg_sentence
from methods.core.results import InputError, atomic_path, read_json
from methods.dag_moe.config import DataConfig

PAD, EOS, UNK, SEP = "<pad>", "<eos>", "<unk>", ";"
GENERATED = "generated"


def _pcfg_words() -> list[str]:
    return sorted({w for rules in _PCFG.values() for r in rules for w in r if w not in _PCFG} - {"."})


def function_names(n: int) -> list[str]:
    return ["I"] + [f"f{i}" for i in range(1, n + 1)]


def vocabulary(cfg: DataConfig) -> list[str]:
    """Fixed word list: specials, functions, numbers 0..m, C2 symbols, PCFG words."""
    nums = [str(i) for i in range(cfg.modulus + 1)]  # "17" appears as the modulus in C2
    return ([PAD, EOS, UNK, SEP, "=", "(", ")", "+", "*", "mod", "."] + function_names(cfg.n_functions)
            + nums + _pcfg_words())


def word_tokenizer(cfg: DataConfig):
    """A `PreTrainedTokenizerFast` over the closed vocabulary (whitespace-split words)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(vocabulary(cfg))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                   unk_token=UNK, padding_side="right")


class World:
    """The fixed part of the task family, built from `DataConfig.seed` alone."""

    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        m, rng = cfg.modulus, random.Random(cfg.seed)
        self.names = function_names(cfg.n_functions)
        self.perms = {"I": list(range(m))}
        for name in self.names[1:]:
            p = list(range(m))
            rng.shuffle(p)
            self.perms[name] = p
        nonid = [(a, b) for a in self.names[1:] for b in self.names[1:]]
        n_held = round(cfg.heldout_frac * len(nonid))
        self.heldout = sorted(rng.sample(nonid, n_held))
        held = set(self.heldout)
        self.train_pairs = [(a, b) for a in self.names for b in self.names if (a, b) not in held]
        self.all_pairs = [(a, b) for a in self.names for b in self.names]
        self.vocab = {w: i for i, w in enumerate(vocabulary(cfg))}
        # segment probabilities that give the configured token fractions: p_t ∝ frac_t / len_t
        c3_len = sum(len(self._c3(random.Random(i))) for i in range(2000)) / 2000
        lens = {"c1": 6.0, "c2": 12.0, "c3": c3_len}
        w = {"c1": cfg.mix_c1 / lens["c1"], "c2": cfg.mix_c2 / lens["c2"], "c3": cfg.mix_c3 / lens["c3"]}
        z = sum(w.values())
        self.seg_probs = {k: v / z for k, v in w.items()}

    def compose(self, f: str, g: str, x: int) -> int:
        """f(g(x)): the outer function is written first."""
        return self.perms[f][self.perms[g][x]]

    # segments as word lists (each ends with SEP)
    def c1_prompt(self, f: str, g: str, x: int) -> list[str]:
        return [f, g, str(x), "="]

    def _c1(self, rng: random.Random, pairs) -> list[str]:
        f, g = pairs[rng.randrange(len(pairs))]
        x = rng.randrange(self.cfg.modulus)
        return self.c1_prompt(f, g, x) + [str(self.compose(f, g, x)), SEP]

    def c2_prompt(self, a: int, b: int, c: int) -> list[str]:
        return ["(", str(a), "+", str(b), ")", "*", str(c), "mod", str(self.cfg.modulus), "="]

    def c2_answer(self, a: int, b: int, c: int) -> int:
        return (a + b) * c % self.cfg.modulus

    def _c2(self, rng: random.Random) -> list[str]:
        a, b, c = (rng.randrange(self.cfg.modulus) for _ in range(3))
        return self.c2_prompt(a, b, c) + [str(self.c2_answer(a, b, c)), SEP]

    @staticmethod
    def _c3(rng: random.Random) -> list[str]:
        return pcfg_sentence(rng).replace(".", " .").split() + [SEP]

    def segment(self, rng: random.Random) -> list[str]:
        u = rng.random()
        if u < self.seg_probs["c1"]:
            return self._c1(rng, self.train_pairs)
        if u < self.seg_probs["c1"] + self.seg_probs["c2"]:
            return self._c2(rng)
        return self._c3(rng)

    def row(self, rng: random.Random, n_tokens: int) -> list[int]:
        words: list[str] = []
        while len(words) < n_tokens:
            words += self.segment(rng)
        return [self.vocab[w] for w in words[:n_tokens]]

    def ids(self, words: list[str]) -> list[int]:
        return [self.vocab[w] for w in words]

    def to_json(self) -> dict:
        return {"config": asdict(self.cfg), "perms": self.perms, "heldout_pairs": self.heldout,
                "seg_probs": self.seg_probs, "vocab": list(self.vocab)}


def _rng(seed: int, step: int, salt: int) -> random.Random:
    # one stream per (seed, step); the salt separates train / val / compose streams
    return random.Random(seed * 1_000_003 + step * 7_919 + salt * 104_729_123)


class MixtureBatches:
    """LM batches on the C1/C2/C3 mixture: `batch(step, batch_size, seed)` is a pure function."""

    def __init__(self, world: World):
        self.world, self.seq_len = world, world.cfg.seq_len

    def batch(self, step: int, batch_size: int, seed: int, salt: int = 1) -> dict:
        import torch

        rng = _rng(seed, step, salt)
        rows = torch.tensor([self.world.row(rng, self.seq_len + 1) for _ in range(batch_size)])
        return {"input_ids": rows[:, :-1], "labels": rows[:, 1:]}

    def val_batches(self, batch_size: int) -> list[dict]:
        """The fixed validation rows (a stream no training seed draws: salt 2)."""
        n = self.world.cfg.n_val_rows
        full = self.batch(0, n, self.world.cfg.seed, salt=2)
        return [{k: v[i:i + batch_size] for k, v in full.items()} for i in range(0, n, batch_size)]


def answer_batch(world: World, prompts: list[list[str]], answers: list[int]) -> dict:
    """Equal-length prompts; the target is the answer token at the last prompt position."""
    import torch

    ids = torch.tensor([world.ids(p) for p in prompts])
    labels = torch.full_like(ids, -100)
    labels[:, -1] = torch.tensor([world.vocab[str(a)] for a in answers])
    return {"input_ids": ids, "labels": labels}


def c1_eval_set(world: World, split: str) -> tuple[list, list]:
    """Every (f, g, x) of a split, exhaustively: "train" pairs, "heldout" pairs, or "all"."""
    pairs = {"train": world.train_pairs, "heldout": world.heldout, "all": world.all_pairs}[split]
    prompts, answers = [], []
    for f, g in pairs:
        for x in range(world.cfg.modulus):
            prompts.append(world.c1_prompt(f, g, x))
            answers.append(world.compose(f, g, x))
    return prompts, answers


def c2_eval_set(world: World) -> tuple[list, list]:
    m = world.cfg.modulus
    trip = [(a, b, c) for a in range(m) for b in range(m) for c in range(m)]
    return [world.c2_prompt(*t) for t in trip], [world.c2_answer(*t) for t in trip]


class ComposeBatches:
    """D2's 1-layer task (as in the pilot's in-distribution run): uniform (f, g, x) over all pairs, loss on the answer."""

    def __init__(self, world: World):
        self.world = world

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        rng, w = _rng(seed, step, 3), self.world
        prompts, answers = [], []
        for _ in range(batch_size):
            f, g = w.all_pairs[rng.randrange(len(w.all_pairs))]
            x = rng.randrange(w.cfg.modulus)
            prompts.append(w.c1_prompt(f, g, x))
            answers.append(w.compose(f, g, x))
        return answer_batch(w, prompts, answers)


# ------------------------------------------------------------------- the data step ----
def build(cfg: DataConfig, out: str | Path) -> dict:
    """Write world.json (permutations, held-out pairs, segment probabilities) and the tokenizer;
    for a hub corpus also train.txt and val.txt, which the shards step tokenizes once."""
    with atomic_path(out, is_dir=True) as tmp:
        info = {"source": cfg.source}
        if cfg.source == GENERATED:
            world = World(cfg)
            (tmp / "world.json").write_text(json.dumps(world.to_json(), indent=1, sort_keys=True) + "\n")
            tok = word_tokenizer(cfg)
            info.update(vocab_size=len(world.vocab), heldout_pairs=len(world.heldout),
                        train_pairs=len(world.train_pairs), seg_probs=world.seg_probs)
        else:  # paper scale: the hub tokenizer, and the corpus streamed to text files
            from methods.core.data import iter_texts
            from methods.core.tokenizer import load_tokenizer

            tok = load_tokenizer(cfg.tokenizer)
            (tmp / "world.json").write_text(json.dumps({"config": asdict(cfg)}, sort_keys=True) + "\n")
            # the first 1% of the characters (whole documents) validate, the rest trains
            n_val, n = max(1, cfg.corpus_chars // 100), {"val": 0, "train": 0}
            with open(tmp / "val.txt", "w", encoding="utf-8") as val, \
                    open(tmp / "train.txt", "w", encoding="utf-8") as train:
                for text in iter_texts(cfg.source, cfg.text_field, cfg.corpus_chars):
                    split = "val" if n["val"] < n_val else "train"
                    (val if split == "val" else train).write(text + "\n")
                    n[split] += len(text) + 1
            if not n["train"]:
                raise InputError(f"corpus {cfg.source!r} has {n['val']} characters, all of them for validation "
                                 f"(corpus_chars={cfg.corpus_chars})")
            info.update(vocab_size=len(tok), val_chars=n["val"], train_chars=n["train"])
        tok.save_pretrained(tmp / "tokenizer")
        (tmp / "info.json").write_text(json.dumps(info, sort_keys=True) + "\n")
    return info


def load_world(data_dir: str | Path) -> World:
    from methods.core.config import from_dict

    spec = read_json(Path(data_dir) / "world.json")
    cfg = from_dict(DataConfig, spec["config"], "data")
    world = World(cfg)
    if cfg.source == GENERATED and world.perms != spec["perms"]:
        raise InputError(f"{data_dir}/world.json does not match its config (other code version?)")
    return world
