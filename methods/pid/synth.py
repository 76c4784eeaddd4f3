"""Generated multimodal items whose label depends on the modalities in known ways (our tiny design for
arXiv 2606.00959).

Every item has an "image" of 4 patch tokens (slot k holds token 8k + value, value in 0..7: a
32-symbol codebook), a 4-token text [task word, filler, value word, filler] and, for the omni
(tri-modal) items, a 4-token "audio" clip coded like the image. Labels are in 0..3.

Bimodal task families (image slots: colour, shape, digit, scene = family marker):
  RED   Y = colour mod 4 and the text's value word states the same colour (both suffice)
  U_TXT Y = the text's value word mod 4; the image is random (text only)
  U_VIS Y = shape mod 4; the text's value word is random (image only)
  SYN   Y = (digit + text value) mod 4 (XOR-like: neither alone says anything)
Omni AV items: image slot 0 = visual attribute v, audio slot 0 = audio attribute a, and the
text is a question: its value word q in 0..3 (N_QUESTIONS) names the question, here an answer
offset. AV-fusion items have Y = (v + a + q) mod 4; "vision-only" items Y = (v + q) mod 4. The
vision-dominant training mix has `vision_only_frac` of vision-only items (nothing marks them).
The question is the text T the paper's Sensory PID conditions on, I(Y; V, A | T): it is
independent of (V, A) and, with them, determines Y (I(Y; T | V, A) = 2 bits on fusion items).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import Data

FAMILIES = ("RED", "U_TXT", "U_VIS", "SYN")
N_CLASSES = 4
IMG_VOCAB = 32
TXT_VOCAB = 29            # 5 task words, 8 fillers, 8 value words, 8 fillers
AUD_VOCAB = 32
AV_WORD = 4
N_QUESTIONS = 4          # omni items: the text's question (value word 0..3)


@dataclass
class DataConfig(Data):
    """The data step's config: the scale file's `data` section plus its `hub` section."""
    hub: dict                # paper scale: the real MLLMs and benchmarks


def _text(rng, word, value):
    n = len(value)
    return np.stack([np.full(n, word), 5 + rng.integers(0, 8, n), 13 + value, 21 + rng.integers(0, 8, n)], 1)


def _patches(vals):
    return vals + 8 * np.arange(vals.shape[1])[None, :]


def vl_items(n: int, fam_probs, rng) -> dict:
    """n bimodal items; the family of each is drawn from `fam_probs` (RED, U_TXT, U_VIS, SYN)."""
    fam = rng.choice(4, size=n, p=np.asarray(fam_probs, float) / np.sum(fam_probs))
    attrs = rng.integers(0, 8, size=(n, 3))               # colour, shape, digit
    tval = rng.integers(0, 8, size=n)
    y = np.zeros(n, dtype=np.int64)
    red, utx, uvi, syn = (fam == k for k in range(4))
    tval[red] = attrs[red, 0]
    y[red] = attrs[red, 0] % 4
    y[utx] = tval[utx] % 4
    y[uvi] = attrs[uvi, 1] % 4
    y[syn] = (attrs[syn, 2] + tval[syn]) % 4
    img = _patches(np.concatenate([attrs, fam[:, None]], 1))
    return {"img": img, "txt": _text(rng, fam, tval), "y": y, "fam": fam}


def av_items(n: int, vision_only_frac: float, rng) -> dict:
    """n omni items with question q: a `vision_only_frac` share has Y = (v + q) mod 4, the rest
    are AV-fusion, Y = (v + a + q) mod 4."""
    v, a = rng.integers(0, 8, n), rng.integers(0, 8, n)
    q = rng.integers(0, N_QUESTIONS, n)
    vision_only = rng.random(n) < vision_only_frac
    y = np.where(vision_only, (v + q) % 4, (v + a + q) % 4).astype(np.int64)
    img = _patches(np.concatenate([v[:, None], rng.integers(0, 8, (n, 2)), np.full((n, 1), 4)], 1))
    aud = _patches(np.concatenate([a[:, None], rng.integers(0, 8, (n, 3))], 1))
    txt = _text(rng, np.full(n, AV_WORD), q)
    return {"img": img, "aud": aud, "txt": txt, "y": y, "fusion": ~vision_only}


def av_question(items: dict) -> np.ndarray:
    """The question q of omni items (the text's value word): the Sensory PID's control variable T."""
    return items["txt"][:, 2] - 13


def build(cfg: DataConfig) -> dict:
    """All splits as numpy arrays. The VL train pool is family-balanced; training runs draw
    from it with their mixture weights (see run.train_mix)."""
    rng = np.random.default_rng(cfg.seed)
    even = [1, 1, 1, 1]
    return {"train": vl_items(cfg.n_train, even, rng), "profile": vl_items(cfg.n_profile, even, rng),
            "test": vl_items(cfg.n_test, even, rng),
            "av_train": av_items(cfg.n_av_train, cfg.vision_only_frac, rng),
            "av_profile": av_items(cfg.n_profile, cfg.vision_only_frac, rng),
            "av_test": av_items(cfg.n_av_test, 0.0, rng)}
