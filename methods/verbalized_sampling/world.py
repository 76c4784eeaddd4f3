"""The synthetic world (our tiny design for arXiv 2510.01171): topics, a grammar pool of "jokes" per topic with a Zipf
reference distribution pi_ref, preference data from an annotator with a planted typicality
weight alpha, and the word-level text formats the tiny LM is trained on.

Formats (one word = one token):
  direct   "direct <topic> : <a> <topic> <v> <place> <eos>"
  sequence "sequence <topic> : y1 ; y2 ; ... ; yk <eos>"          (k without replacement)
  vs       "vs <topic> : y1 p21 ; y2 p08 ; ... <eos>"              (probability = pi_ref, 2 digits)
"""
from __future__ import annotations

import math

import numpy as np

from .config import WorldConfig

# config.MAX_TOPICS = len(TOPICS) and config.GRAMMAR_SIZE = len(ADJS) * len(VERBS) * len(PLACES)
# bound world.n_topics / world.pool_size (tests/verbalized_sampling/test_config.py checks them)
TOPICS = ["cats", "dogs", "cars", "birds", "boats", "trees", "robots", "clouds", "fish", "kings",
          "bees", "ships", "moons", "frogs", "lamps", "bears", "drums", "ghosts", "pens", "tigers"]
ADJS = ["lazy", "happy", "tiny", "angry", "sleepy", "brave", "silly", "grumpy", "shy", "loud"]
VERBS = ["dance", "sing", "sleep", "jump", "cook", "laugh", "fly", "swim"]
PLACES = ["kitchen", "garden", "office", "moon", "beach", "library", "attic", "forest"]
EOS = "<eos>"
FORMATS = ("direct", "sequence", "vs")


def build_world(cfg: WorldConfig) -> dict:
    """{"topics": [...], "pool": {topic: [joke, ...]}, "p_ref": {topic: [...]},
    "r_true": {topic: [0|1|2, ...]}, "k": k}. pi_ref = Zipf(s) over a random permutation."""
    rng = np.random.default_rng(cfg.seed)
    topics = TOPICS[:cfg.n_topics]
    zipf = 1.0 / np.arange(1, cfg.pool_size + 1) ** cfg.zipf_s
    zipf /= zipf.sum()
    pool, p_ref, r_true = {}, {}, {}
    for t in topics:
        combos = rng.choice(len(ADJS) * len(VERBS) * len(PLACES), cfg.pool_size, replace=False)
        jokes = []
        for c in combos:
            a, rest = divmod(int(c), len(VERBS) * len(PLACES))
            v, pl = divmod(rest, len(PLACES))
            jokes.append(f"{ADJS[a]} {t} {VERBS[v]} {PLACES[pl]}")
        pool[t] = jokes
        p_ref[t] = zipf[rng.permutation(cfg.pool_size)].tolist()
        r_true[t] = rng.integers(0, 3, cfg.pool_size).tolist()
    return {"topics": topics, "pool": pool, "p_ref": p_ref, "r_true": r_true, "k": cfg.k}


def prob_token(p: float) -> str:
    return f"p{min(99, max(0, int(round(100 * p)))):02d}"


def prompt_text(fmt: str, topic: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    return f"{fmt} {topic} :"


def sample_doc(world: dict, rng: np.random.Generator, fmt: str | None = None) -> str:
    """One training document drawn from pi_ref (format mix 2:1:1 direct/sequence/vs)."""
    t = world["topics"][rng.integers(len(world["topics"]))]
    fmt = fmt or FORMATS[[0, 0, 1, 2][rng.integers(4)]]
    pool, p = world["pool"][t], np.asarray(world["p_ref"][t])
    if fmt == "direct":
        body = pool[rng.choice(len(pool), p=p)]
    else:
        idx = rng.choice(len(pool), world["k"], replace=False, p=p)
        body = " ; ".join(pool[i] + (f" {prob_token(p[i])}" if fmt == "vs" else "") for i in idx)
    return f"{prompt_text(fmt, t)} {body} {EOS}"


def vocabulary(world: dict) -> list[str]:
    words = {"direct", "sequence", "vs", ":", ";"} | set(world["topics"]) | set(ADJS) | \
        set(VERBS) | set(PLACES) | {f"p{i:02d}" for i in range(100)}
    return sorted(words)


def preferences(world: dict, cfg: WorldConfig) -> list[dict]:
    """HelpSteer-like data: each prompt (a cluster) has `responses_per_prompt` distinct responses
    drawn from pi_ref; every within-prompt pair gets a Bradley-Terry outcome
    P(i > j) = sigmoid(alpha * (log pi_ref(i) - log pi_ref(j)) + r_true(i) - r_true(j))."""
    rng = np.random.default_rng(cfg.seed + 1)
    rows = []
    for q in range(cfg.n_pref_prompts):
        t = world["topics"][rng.integers(len(world["topics"]))]
        p = np.asarray(world["p_ref"][t])
        idx = rng.choice(len(p), cfg.responses_per_prompt, replace=False, p=p)
        for a in range(len(idx)):
            for b in range(a + 1, len(idx)):
                i, j = int(idx[a]), int(idx[b])
                z = cfg.alpha * (math.log(p[i]) - math.log(p[j])) + \
                    world["r_true"][t][i] - world["r_true"][t][j]
                win = bool(rng.random() < 1 / (1 + math.exp(-z)))
                rows.append({"prompt_id": q, "topic": t, "i": i, "j": j, "win_i": win})
    return rows
