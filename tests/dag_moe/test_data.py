"""Tiny DAG-MoE data: composition and modular targets recomputed independently from the written
world, determinism, the held-out split, mixture fractions, the tokenizer, and the CLI's
one-line error on a bad config key."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from methods.dag_moe import data as D

ROOT = Path(__file__).resolve().parents[2]
# the tiny world (the step's former defaults)
DATA = {"source": "generated", "text_field": "text", "tokenizer": "word", "corpus_chars": 0, "modulus": 17,
        "n_functions": 12, "heldout_frac": 0.3, "mix_c1": 0.5, "mix_c2": 0.25, "mix_c3": 0.25, "seq_len": 32,
        "n_val_rows": 256, "seed": 1234}
CFG = D.DataConfig(**DATA)


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("dm") / "data"
    D.build(CFG, out)
    return out


def _segments(ids, inv):
    words = [inv[i] for i in ids]
    segs, cur = [], []
    for w in words:
        if w == D.SEP:
            segs.append(cur)
            cur = []
        else:
            cur.append(w)
    return segs  # complete segments only (the row's cut tail is dropped)


def test_world_file_and_permutations(world_dir):
    spec = json.loads((world_dir / "world.json").read_text())
    perms = spec["perms"]
    assert len(perms) == 13 and perms["I"] == list(range(17))
    for name, p in perms.items():
        assert sorted(p) == list(range(17)), name  # each f_i is a permutation of Z_17
    assert sum(p != list(range(17)) for p in perms.values()) == 12


def test_targets_in_training_rows_are_correct(world_dir):
    # recompute every C1/C2 answer in 50 training batches from world.json alone
    spec = json.loads((world_dir / "world.json").read_text())
    perms, inv = spec["perms"], spec["vocab"]
    held = {tuple(p) for p in spec["heldout_pairs"]}
    mix = D.MixtureBatches(D.load_world(world_dir))
    n_c1 = n_c2 = 0
    for step in range(50):
        b = mix.batch(step, 16, seed=0)
        for row_in, row_lab in zip(b["input_ids"].tolist(), b["labels"].tolist()):
            assert row_in[1:] == row_lab[:-1]  # labels are the inputs shifted by one
            for s in _segments(row_in + row_lab[-1:], inv):
                if s and s[0] in perms:  # C1: f g x = y  ->  y = f(g(x))
                    f, g, x, eq, y = s
                    assert eq == "=" and int(y) == perms[f][perms[g][int(x)]]
                    assert (f, g) not in held
                    n_c1 += 1
                elif s and s[0] == "(":  # C2: ( a + b ) * c mod 17 = y
                    a, b_, c, y = int(s[1]), int(s[3]), int(s[6]), int(s[10])
                    assert s[7:10] == ["mod", "17", "="] and y == (a + b_) * c % 17
                    n_c2 += 1
    assert n_c1 > 500 and n_c2 > 150


def test_batches_are_pure_functions_of_seed_and_step(world_dir):
    a = D.MixtureBatches(D.load_world(world_dir))
    b = D.MixtureBatches(D.World(CFG))  # rebuilt from the config alone
    for step in (0, 7, 123):
        x, y = a.batch(step, 8, seed=1), b.batch(step, 8, seed=1)
        assert all((x[k] == y[k]).all() for k in x)
    assert not (a.batch(3, 8, 1)["input_ids"] == a.batch(4, 8, 1)["input_ids"]).all()
    assert not (a.batch(3, 8, 1)["input_ids"] == a.batch(3, 8, 2)["input_ids"]).all()
    c = D.ComposeBatches(a.world)
    assert (c.batch(5, 32, 0)["labels"] == c.batch(5, 32, 0)["labels"]).all()


def test_heldout_split_is_disjoint_and_complete():
    w = D.World(CFG)
    held, train = set(w.heldout), set(w.train_pairs)
    assert held.isdisjoint(train) and held | train == set(w.all_pairs)
    assert len(held) == round(0.3 * 144) == 43
    assert all("I" not in p for p in held)  # single-function examples always train
    p_tr, _ = D.c1_eval_set(w, "train")
    p_ho, _ = D.c1_eval_set(w, "heldout")
    assert len(p_ho) == 43 * 17 and len(p_tr) == (169 - 43) * 17
    assert not {tuple(p[:2]) for p in p_tr} & {tuple(p[:2]) for p in p_ho}


def test_eval_sets_answers_independent():
    w = D.World(CFG)
    prompts, answers = D.c2_eval_set(w)
    assert len(prompts) == 17 ** 3
    for p, y in list(zip(prompts, answers))[::97]:
        assert y == (int(p[1]) + int(p[3])) * int(p[6]) % 17
    prompts, answers = D.c1_eval_set(w, "all")
    for (f, g, x, _), y in list(zip(prompts, answers))[::31]:
        assert y == w.perms[f][w.perms[g][int(x)]]
    b = D.answer_batch(w, prompts[:5], answers[:5])
    assert (b["labels"][:, :-1] == -100).all() and b["labels"][0, -1] == w.vocab[str(answers[0])]


def test_mixture_token_fractions():
    w = D.World(CFG)
    ids = D.MixtureBatches(w).batch(0, 400, seed=9)["input_ids"].flatten().tolist()
    inv = list(w.vocab)
    pcfg = set(D._pcfg_words()) | {"."}
    frac_c3 = sum(inv[i] in pcfg for i in ids) / len(ids)
    # C3 words only (its ";" separators, 1 token of ~9 per sentence, are not counted)
    assert abs(frac_c3 - 0.25 * (1 - 1 / 9.6)) < 0.03
    assert 55 <= len(w.vocab) <= 75  # planned: about 70 words


def test_word_tokenizer_matches_world_ids():
    w = D.World(CFG)
    tok = D.word_tokenizer(CFG)
    text = "f3 f7 5 = 12 ; ( 3 + 4 ) * 5 mod 17 = 1 ; the cat sees a small dog . ;"
    assert tok(text, add_special_tokens=False)["input_ids"] == w.ids(text.split())
    assert len(tok) == len(w.vocab) and tok.pad_token_id == 0


def test_bad_config_key_is_one_line_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "methods.dag_moe", "data", "--config",
                          json.dumps({"bogus_key": 1}), "--out", str(tmp_path / "d")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bogus_key" in lines[0]
    out = subprocess.run([sys.executable, "-m", "methods.dag_moe", "data", "--config",
                          json.dumps({**DATA, "mix_c1": 0.9}), "--out", str(tmp_path / "d")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "mix_c1" in out.stderr.strip().splitlines()[-1]
    assert len(out.stderr.strip().splitlines()) == 1
