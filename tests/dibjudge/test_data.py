"""Data properties the tiny design relies on: fact values have one surface form per language, so
the correct answer's value token occurs verbatim in the context; a wrong answer differs from the
correct one in exactly the asked slot (or omits it); a hallucinated value occurs nowhere in the
context, a swapped one is the distractor's value; the exact-match segment feature marks them;
the train set has the planned MT-better rate."""
import json

import pytest

from methods.core.config import from_json
from methods.dibjudge.config import DataConfig
from methods.dibjudge.run import Vocab
from methods.dibjudge.synth_lang import generate

CFG = dict(n_people=6, n_objects=4, n_colours=5, max_count=4, n_train={"EN": 300, "L1": 300, "L2": 300},
           n_synonyms={"L1": 2, "L2": 3}, mt_better_frac=0.8, particle_prob=0.5, n_test=200, len_bins=4,
           nll_bins=5, ttr_bins=5, omit_frac=0.3, swap_frac=0.5, ref_lm_sentences=50, seed=1)


@pytest.fixture(scope="module")
def splits():
    return generate(from_json(DataConfig, json.dumps(CFG), "data"))[0]


def _values(cfg):
    return {f"c{i}" for i in range(cfg["n_colours"])} | {f"n{i}" for i in range(1, cfg["max_count"] + 1)}


def _good_bad(r):
    good, bad = (r["a"], r["b"]) if r["label"] == 0 else (r["b"], r["a"])
    assert good["correct"] and not bad["correct"]
    return good, bad


def _surface(lang, v):
    return v if lang == "EN" else f"{lang}_{v}"


@pytest.mark.parametrize("split", ["train", "id", "adv"])
def test_wrong_answer_differs_in_exactly_the_fact_slot(splits, split):
    vals = _values(CFG)
    kinds = {"omit": 0, "swap": 0, "hall": 0}
    for r in splits[split]:
        good, bad = _good_bad(r)
        g, b = good["en"].split(), bad["en"].split()
        ctx = set(r["prompt"].split())
        gv = [t for t in g if t in vals]
        assert len(gv) == 2 and all(_surface(r["lang"], v) in ctx for v in gv)  # correct values verbatim
        assert all(_surface(r["lang"], v) in good["text"].split() for v in gv)
        if len(b) == len(g) - 1:
            kinds["omit"] += 1
            assert sum(t in vals for t in b) == 1
            continue
        diff = [i for i, (x, y) in enumerate(zip(g, b)) if x != y]
        assert len(b) == len(g) and len(diff) == 1 and g[diff[0]] in vals and b[diff[0]] in vals
        wrong = _surface(r["lang"], b[diff[0]])
        assert wrong in bad["text"].split()
        kinds["swap" if wrong in ctx else "hall"] += 1
    n = len(splits[split])
    if split == "adv":
        assert kinds["omit"] == 0  # adversarial worse = one wrong fact
    else:
        assert kinds["omit"] / n == pytest.approx(CFG["omit_frac"], abs=0.06)
    assert kinds["swap"] > 0.2 * n and kinds["hall"] > 0.2 * n


def test_mt_better_rate_and_bias_suite(splits):
    for lang in ("L1", "L2"):
        rows = [r for r in splits["train"] if r["lang"] == lang]
        mt_better = sum(_good_bad(r)[0]["style"] == "mt" for r in rows) / len(rows)
        assert mt_better == pytest.approx(CFG["mt_better_frac"], abs=0.06)  # binomial sd 0.023
    for r in splits["bias"]:  # equal quality; label = index of the MT response
        assert r["a"]["correct"] and r["b"]["correct"] and r["a"]["en"] == r["b"]["en"]
        assert [r["a"], r["b"]][r["label"]]["style"] == "mt"


def test_exact_match_segments():
    v = Vocab(["<pad>", "<sep>", "x", "y", "z"])
    ids, seg = v.encode("x y", "y z x", 64)
    assert ids == [2, 3, 1, 3, 4, 2] and seg == [0, 0, 0, 1, 2, 1]


def test_bad_fraction_is_named():
    bad = dict(CFG, swap_frac=1.5)
    with pytest.raises(Exception, match="data.swap_frac"):
        from_json(DataConfig, json.dumps(bad), "data")
