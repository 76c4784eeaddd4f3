"""The SiameseNorm DAG steps: corpus generator, gradient statistics, divergence flag, claim
metrics on constructed tables, step timing, and bad-input errors of the CLI."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from methods.core.claims import evaluate_claims, load_claims
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig
from methods.siamesenorm import analysis as A
from methods.siamesenorm.config import AnalysisConfig, DataConfig
from methods.siamesenorm.data import build, corpus, held_out_problems
from methods.siamesenorm.model import SiameseNormConfig, SiameseNormForCausalLM, expected_num_params
from methods.siamesenorm.run import is_diverged, layer_grad_norms
from methods.siamesenorm.steptime import StepTimeConfig, time_schemes

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = ROOT / "methods" / "siamesenorm" / "claims.yaml"
torch.set_num_threads(1)
ARITH = re.compile(r"^(\d+)([+\-*])(\d+)=(-?\d+)$")
# the data step's former defaults, written out (the config classes have none)
DATA = dict(source="generated", text_field="text", tokenizer="char", train_chars=2_000_000, val_chars=100_000,
            arith_fraction=0.5, max_operand=1000, max_digit=10, n_arith_eval=500, seed=0)
ANALYSIS = AnalysisConfig(siamese="post_pre", baseline="pre", post="post", low_lr=1e-2, high_lr=3e-2,
                          c1_tolerance=0.05, c1_post_margin=0.10)


# ------------------------------------------------------------------------------ data ----
def _lines(text):
    return [l for l in text.split("\n") if l]


def test_corpus_arithmetic_is_correct_and_mix_matches_fraction():
    import random

    cfg = DataConfig(**{**DATA, "train_chars": 40_000, "max_operand": 1000, "max_digit": 10, "arith_fraction": 0.5})
    text = corpus(random.Random(3), cfg.train_chars, cfg, set())
    arith_chars = other_chars = 0
    for line in _lines(text):
        m = ARITH.match(line)
        if m:
            a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
            assert a < 1000 and (b < 10 if op == "*" else b < 1000)
            assert c == {"+": a + b, "-": a - b, "*": a * b}[op], line
            arith_chars += len(line) + 1
        else:
            assert line.endswith(".") and re.fullmatch(r"[a-z .]+", line), line  # a PCFG sentence
            other_chars += len(line) + 1
    share = arith_chars / (arith_chars + other_chars)
    assert abs(share - 0.5) < 0.01, share
    assert len(text) >= cfg.train_chars


def test_held_out_problems_never_in_training_text(tmp_path):
    cfg = DataConfig(**{**DATA, "train_chars": 30_000, "val_chars": 3_000, "max_operand": 12, "max_digit": 4,
                         "n_arith_eval": 40, "seed": 5})
    build(cfg, tmp_path / "d")
    evals = [json.loads(l) for l in (tmp_path / "d" / "arith_eval.jsonl").read_text().splitlines()]
    assert len(evals) == 40 and len({e["prompt"] for e in evals}) == 40
    seen = {l.split("=")[0] + "=" for l in _lines((tmp_path / "d" / "train.txt").read_text()
                                                   + (tmp_path / "d" / "val.txt").read_text()) if ARITH.match(l)}
    assert seen, "no arithmetic in the corpus"
    assert not seen & {e["prompt"] for e in evals}
    for e in evals:  # answers computed independently of the generator
        a, op, b = re.match(r"^(\d+)([+\-*])(\d+)=$", e["prompt"]).groups()
        assert int(e["answer"]) == eval(f"{int(a)}{op}{int(b)}")  # noqa: S307 (digits and one operator)
    # the small operand space (2·12² + 12·4 = 336 problems) forces redraws: the exclusion works
    from methods.core.tokenizer import load_tokenizer

    tok = load_tokenizer(tmp_path / "d" / "tokenizer")
    assert tok.decode(tok("12+3=15\n")["input_ids"]) == "12+3=15\n"
    # the shards step (as the siamesenorm_shards rule runs it) holds the tokenizer's encoding of the
    # text files, char for char
    from methods.core.__main__ import build_parser
    from methods.core.cli import main
    from methods.core.shards import ShardedTokenStream

    d = tmp_path / "d"
    assert main(build_parser(), ["shards", "--source", str(d / "train.txt"), "--val-source", str(d / "val.txt"),
                                 "--tokenizer", str(d / "tokenizer"), "--eos", "no", "--out", str(tmp_path / "s")]) == 0
    for name in ("train", "val"):
        text = (d / f"{name}.txt").read_text()
        s = ShardedTokenStream(tmp_path / "s" / name, 1)
        ids = s.read(0, len(s))
        assert ids.tolist() == tok(text, add_special_tokens=False)["input_ids"] and len(ids) == len(text)


def test_generation_is_deterministic():
    import random

    cfg = DataConfig(**{**DATA, "train_chars": 5_000})
    assert corpus(random.Random(1), 5_000, cfg, set()) == corpus(random.Random(1), 5_000, cfg, set())
    assert held_out_problems(random.Random(2), replace(cfg, n_arith_eval=30)) == \
        held_out_problems(random.Random(2), replace(cfg, n_arith_eval=30))


def test_too_many_held_out_problems_is_an_input_error():
    with pytest.raises(InputError, match="n_arith_eval"):
        DataConfig(**{**DATA, "max_operand": 3, "max_digit": 2, "n_arith_eval": 20})


# -------------------------------------------------------------------- run statistics ----
def test_layer_grad_norms_equal_manual_per_layer_norms():
    torch.manual_seed(0)
    model = SiameseNormForCausalLM(SiameseNormConfig(vocab_size=20, hidden_size=16, intermediate_size=24,
                                                     num_hidden_layers=3, num_attention_heads=2,
                                                     norm_scheme="post_pre"))
    x = torch.randint(0, 20, (2, 9))
    model(input_ids=x, labels=x).loss.backward()
    got = layer_grad_norms(model)
    for l, layer in enumerate(model.model.layers):
        flat = torch.cat([p.grad.flatten() for p in layer.parameters()]).double()
        assert got[l] == pytest.approx(float(flat.norm()), rel=1e-12)
    assert len(got) == 3


@pytest.mark.parametrize("initial,final,diverged", [
    (3.6, 0.8, False), (3.6, 3.5, True), (3.6, 0.9 * 3.6, False), (3.6, float("nan"), True),
    (3.6, float("inf"), True)])
def test_divergence_flag(initial, final, diverged):
    assert is_diverged(initial, final, 0.9) is diverged


def test_grad_probe_rows_come_from_the_trainer(monkeypatch):
    """The trainer calls the probe after backward, before clipping, with the 1-based update
    index; the row's norms equal a hand-made backward on the same batch at the same weights."""
    from methods.core.train import TrainConfig, lm_loss, train

    monkeypatch.setenv("TQDM_DISABLE", "1")
    torch.manual_seed(0)
    model = SiameseNormForCausalLM(SiameseNormConfig(vocab_size=20, hidden_size=16, intermediate_size=24,
                                                     num_hidden_layers=2, num_attention_heads=2))
    batches = [{"input_ids": torch.randint(0, 20, (2, 8)), "labels": torch.randint(0, 20, (2, 8))} for _ in range(4)]
    snapshots = {}

    def probe(done):
        if done == 3:
            snapshots["norms"] = layer_grad_norms(model)
            return {"layer_grad_norms": snapshots["norms"]}
        return None

    import copy

    def batch_fn(step):
        if step == 2:  # weights before update 3: recompute its gradient independently
            ref = copy.deepcopy(model)
            lm_loss(ref, batches[2]).backward()
            snapshots["ref"] = [math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in l.parameters()))
                                for l in ref.model.layers]
        return batches[step]

    rows = train(model, batch_fn, TrainConfig(steps=4, batch_size=2, lr=1e-2, grad_clip=0.5, log_every=1),
                 grad_probe=probe)
    probe_rows = [r for r in rows if "layer_grad_norms" in r]
    assert [r["step"] for r in probe_rows] == [3]
    assert probe_rows[0]["layer_grad_norms"] == pytest.approx(snapshots["ref"], rel=1e-6)


# -------------------------------------------------------------------------- analysis ----
def _row(scheme, lr, seed, val, arith=0.1, diverged=False, grad=2.0, n=1000):
    return {"scheme": scheme, "lr": lr, "seed": seed, "val_loss": val, "val_ppl": math.exp(val),
            "diverged": diverged, "arith_score": arith, "initial_val_loss": 3.6, "n_params": n,
            "grad_ratio_first_last": grad, "wall_ms_per_step": 1.0}


def _table(post_hi=(3.5, 3.4), post_div=(True, True), seeds=(0, 1), s_arith=None, s_val_hi=None, s_grad=None):
    s_arith = s_arith or {seed: 0.30 for seed in seeds}
    s_val_hi = s_val_hi or {seed: 0.78 for seed in seeds}
    s_grad = s_grad or {seed: 4.0 for seed in seeds}
    rows = []
    for i, seed in enumerate(seeds):
        rows += [_row("pre", 0.01, seed, 0.80, 0.20, grad=2.0, n=1000),
                 _row("pre", 0.03, seed, 0.84, 0.15, grad=2.0, n=1000),
                 _row("post", 0.01, seed, 0.81, 0.10, grad=0.2, n=900),
                 _row("post", 0.03, seed, post_hi[i], 0.0, diverged=post_div[i], grad=0.3, n=900),
                 _row("post_pre", 0.01, seed, 0.80 - 0.002 * seed, 0.25, grad=s_grad[seed], n=1000 + 26 * 8),
                 _row("post_pre", 0.03, seed, s_val_hi[seed], s_arith[seed], grad=4.0 + seed, n=1000 + 26 * 8)]
    return pd.DataFrame(rows)


STEPTIME = {"ms_per_step": {"pre": 10.0, "post": 9.0, "post_pre": 13.0},
            "ratio_vs_pre": {"pre": 1.0, "post": 0.9, "post_pre": 1.3}}


def test_claim_metrics_hand_computed():
    m = A.claim_metrics(_table(), ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["c1_siamese_high_over_low"] == pytest.approx(0.78 / 0.799)
    assert m["c1_siamese_stable_seeds"] == 2 and m["c1_siamese_stable_high_lr"] is True
    assert m["c1_post_fail_seeds"] == 2 and m["c1_post_diverged_seeds"] == 2
    assert m["best_lr"] == {"post": 0.01, "post_pre": 0.03, "pre": 0.01}
    assert m["c2_ppl_ratio"] == pytest.approx(math.exp(0.78) / math.exp(0.80))
    assert m["c2_ppl_ratio_seeds_below_1"] == 2
    assert m["c3_arith_gain"] == pytest.approx(0.30 - 0.20)
    assert m["c3_arith_rel_gain"] == pytest.approx(0.5)
    assert m["c3_arith_max"] == pytest.approx(0.30)
    assert m["c4_param_delta"] == 208 and m["c4_param_delta_matches"] is True
    assert m["c4_step_time_ratio"] == 1.3
    # geometric means at lr 0.01: post_pre 4.0, pre 2.0 -> fold 2.0; post 0.2 -> post fold 10
    assert m["c5_grad_ratio_fold"] == pytest.approx(2.0)
    assert m["c5_post_fold"] == pytest.approx(10.0)
    assert m["grad_ratio_first_last"]["post"] == pytest.approx(0.2)
    # per-seed values as replicates (core computes the interval), per-seed pass/fail as counts
    assert m["replicates"]["c3_arith_gain"] == {"unit": "seed", "values": pytest.approx([0.1, 0.1]), "ids": [0, 1]}
    assert m["replicates"]["c2_ppl_ratio"]["values"] == pytest.approx([math.exp(0.78) / math.exp(0.80)] * 2)
    assert "c3_arith_gain" not in m["intervals"] and "c2_ppl_ratio" not in m["intervals"]
    assert (m["holds"]["c1_siamese_stable_high_lr"]["k"], m["holds"]["c1_siamese_stable_high_lr"]["n"]) == (2, 2)
    assert (m["holds"]["c1_post_fails_high_lr"]["k"], m["holds"]["c1_post_fails_high_lr"]["n"]) == (2, 2)
    assert m["c1_post_fails_high_lr"] is True and m["inconclusive"] == {}


def test_seed_intervals_match_scipy_t_over_paired_seeds():
    from scipy import stats

    seeds = (0, 1, 2)
    s_arith = {0: 0.21, 1: 0.26, 2: 0.20}          # pre scores 0.20 at its best lr, every seed
    s_val_hi = {0: 0.78, 1: 0.77, 2: 0.795}
    s_grad = {0: 4.0, 1: 1.0, 2: 3.0}               # pre: 2.0 -> log ratios log 2, log 0.5, log 1.5
    m = A.claim_metrics(_table(post_hi=(3.5, 0.86, 0.9), post_div=(True, False, False), seeds=seeds,
                               s_arith=s_arith, s_val_hi=s_val_hi, s_grad=s_grad),
                        ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})

    def t95(x):
        x = np.asarray(x, float)
        return stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))

    gain = [s_arith[s] - 0.20 for s in seeds]
    assert m["c3_arith_gain"] == pytest.approx(np.mean(gain))
    assert m["c3_arith_seeds_siamese_higher"] == 2  # seed 2 ties (0.20 vs 0.20)
    from methods.core.stats import interval_from_replicates

    rec = m["replicates"]["c3_arith_gain"]
    assert rec["values"] == pytest.approx(gain) and rec["ids"] == [0, 1, 2] and rec["unit"] == "seed"
    iv = interval_from_replicates(rec)
    assert (iv["lo"], iv["hi"]) == pytest.approx(t95(gain)) and iv["n"] == 3
    ratio = [math.exp(s_val_hi[s]) / math.exp(0.80) for s in seeds]
    assert m["c2_ppl_ratio"] == pytest.approx(np.mean(ratio))
    assert m["replicates"]["c2_ppl_ratio"]["values"] == pytest.approx(ratio)
    iv = interval_from_replicates(m["replicates"]["c2_ppl_ratio"])
    assert (iv["lo"], iv["hi"]) == pytest.approx(t95(ratio))
    # C1b per seed: diverged / 0.86/0.84 = 1.024 / 0.9/0.84 = 1.071 -> fails in 1 of 3 only
    assert m["c1_post_fail_seeds"] == 1
    assert m["holds"]["c1_post_fails_high_lr"]["k"] == 1 and m["holds"]["c1_post_fails_high_lr"]["n"] == 3
    assert m["c1_post_fails_high_lr"] is False
    # C1a per seed: 0.78/0.80, 0.77/0.798, 0.795/0.796 all <= 1.05
    assert m["c1_siamese_stable_seeds"] == 3
    # C5: fold of the geometric means; interval of the per-seed log ratios mapped by exp|x|
    logr = np.log([s_grad[s] / 2.0 for s in seeds])
    assert m["c5_grad_ratio_fold"] == pytest.approx(math.exp(abs(logr.mean())))
    lo, hi = t95(logr)
    assert lo < 0 < hi  # straddles 0: the fold interval starts at 1
    assert m["intervals"]["c5_grad_ratio_fold"]["lo"] == pytest.approx(1.0)
    assert m["intervals"]["c5_grad_ratio_fold"]["hi"] == pytest.approx(math.exp(max(-lo, hi)))
    assert m["intervals"]["c5_grad_ratio_fold"]["unit"] == "seed"
    # the claims engine reads them: C3's gains straddle 0, C1a holds in 3 of 3 (too few to decide)
    rows = {r["id"]: r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"]}
    assert rows["C3"]["verdict"] == "inconclusive" and rows["C3"]["n"] == 3
    assert rows["C1a"]["verdict"] == "inconclusive" and "3 of 3 seeds" in rows["C1a"]["note"]


def test_one_seed_gives_no_interval():
    m = A.claim_metrics(_table(post_hi=(3.5,), post_div=(True,), seeds=(0,)), ANALYSIS, STEPTIME,
                        {"d_model": 8, "n_layers": 6})
    assert m["intervals"] == {} and m["c3_arith_gain"] == pytest.approx(0.1)
    assert "no interval" in m["notes"]["c3_arith_gain"]
    assert m["replicates"]["c3_arith_gain"]["values"] == pytest.approx([0.1])
    rows = {r["id"]: r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"]}
    assert rows["C3"]["verdict"] == "inconclusive" and rows["C3"]["undecided_by"] == "n < 3"


def test_a_diverged_seed_is_reported_and_makes_the_claim_inconclusive():
    """A seed whose run at the scheme's best lr diverged (non-finite loss) is not dropped
    silently: the replicates are the other seeds, named; the seed is in the note and the claim
    is inconclusive, not decided on the seeds that remain."""
    df = _table(post_hi=(3.5, 3.4, 3.3), post_div=(True, True, True), seeds=(0, 1, 2))
    # post_pre: seed 1 diverges at lr 0.01 and seed 0 at lr 0.03, so every lr has a diverged seed
    for lr, seed in ((0.01, 1), (0.03, 0)):
        df.loc[(df.scheme == "post_pre") & (df.lr == lr) & (df.seed == seed),
               ["val_loss", "val_ppl", "diverged"]] = [float("nan"), float("nan"), True]
    df.loc[(df.scheme == "post_pre") & (df.lr == 0.01) & (df.seed == 1), "grad_ratio_first_last"] = float("nan")
    m = A.claim_metrics(df, ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["best_lr"]["post_pre"] == 0.01
    assert m["replicates"]["c2_ppl_ratio"]["ids"] == [0, 2]
    assert "[1]" in m["inconclusive"]["c2_ppl_ratio"] and "[1]" in m["notes"]["c2_ppl_ratio"]
    assert "[1]" in m["inconclusive"]["c5_grad_ratio_fold"] and m["intervals"]["c5_grad_ratio_fold"]["n"] == 2
    rows = {r["id"]: r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"]}
    assert rows["C2"]["verdict"] == "inconclusive" and "diverged" in rows["C2"]["note"]
    assert rows["C5"]["verdict"] == "inconclusive"
    assert rows["C1a"]["verdict"] == "inconclusive"   # 2 of 3 seeds stable


def test_post_without_divergence_but_10pct_worse_still_fails():
    m = A.claim_metrics(_table(post_hi=(0.93, 0.93), post_div=(False, False)), ANALYSIS,
                        STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["c1_post_over_pre_high_lr"] == pytest.approx(0.93 / 0.84)
    assert m["c1_post_fail_seeds"] == 2
    m = A.claim_metrics(_table(post_hi=(0.90, 0.90), post_div=(False, False)), ANALYSIS,
                        STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["c1_post_fail_seeds"] == 0  # 0.90/0.84 = 1.071 < 1.10 in every seed


def test_diverged_runs_lose_the_best_lr_and_a_diverged_siamese_is_unstable():
    df = _table()
    df.loc[(df.scheme == "post_pre") & (df.lr == 0.03), ["val_loss", "diverged"]] = [float("nan"), True]
    m = A.claim_metrics(df, ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["best_lr"]["post_pre"] == 0.01
    assert m["c1_siamese_stable_high_lr"] is False and m["c1_siamese_stable_seeds"] == 0


def test_missing_lr_in_sweep_is_reported():
    df = _table()
    with pytest.raises(KeyError, match="lr 0.1"):
        A.claim_metrics(df, replace(ANALYSIS, high_lr=0.1), STEPTIME, {"d_model": 8, "n_layers": 6})


# ------------------------------------------------------------------------- step time ----
def test_step_timer_counts_parameters_and_normalises_to_pre():
    cfg = StepTimeConfig(model=ModelConfig(d_model=16, n_layers=2, n_heads=2, d_ff=24), batch_size=2, seq_len=8,
                         vocab_size=20, warmup=1, rounds=3, seed=0, schemes=["pre", "post_pre", "hybrid_pre"])
    res = time_schemes(cfg)
    assert res["ratio_vs_pre"]["pre"] == 1.0
    for s in cfg.schemes:
        conf = SiameseNormConfig(vocab_size=20, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                 num_attention_heads=2, norm_scheme=s)
        assert res["n_params"][s] == expected_num_params(conf)
        assert res["ms_per_step"][s] > 0
    assert res["n_params"]["post_pre"] - res["n_params"]["pre"] == (4 * 2 + 2) * 16


# ------------------------------------------------------------------------------- CLI ----
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "methods.siamesenorm", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("step,cfg,needle", [
    ("data", {"train_chars": 100, "n_arith_evl": 3}, "unknown config key 'data.n_arith_evl'"),
    ("data", {"train_chars": "lots"}, "config key 'data.train_chars'"),
    ("data", {"arith_fraction": 1.5}, "arith_fraction"),
])
def test_bad_data_config_is_one_line(tmp_path, step, cfg, needle):
    out = _cli(step, "--config", json.dumps({**DATA, **cfg}), "--out", str(tmp_path / "d"))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "d").exists()


def test_train_on_missing_data_is_one_line(tmp_path):
    # the train step's former defaults, written out (the config classes have none)
    run = {"model": asdict(ModelConfig(d_model=64, n_layers=6, n_heads=4, d_ff=172)),
           "train": asdict(TrainConfig(steps=400, batch_size=16, lr=1e-2)), "seq_len": 64, "eval_batches": 16,
           "grad_stats_step": 100, "diverge_ratio": 0.9, "hybrid_attn_norm": False}
    out = _cli("train", "--config", json.dumps(run), "--scheme", "pre", "--lr", "0.01", "--seed", "0",
               "--data", str(tmp_path / "nope"), "--shards", str(tmp_path / "nope_shards"), "--out", str(tmp_path / "run"),
               "--checkpoint", str(tmp_path / "c.pt"))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing input" in lines[0] and "nope" in lines[0], out.stderr
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------ evaluation ----
def test_trivial_products_are_scored_apart(tmp_path):
    """The held-out problems without ×0 / ×1 products go to a second lm-eval task: its sample
    count is the hand count of the non-trivial rows, and an untrained model scores in [0, 1]."""
    from methods.core.models import save_model
    from methods.core.results import write_jsonl
    from methods.core.tokenizer import train_tokenizer
    from methods.siamesenorm.config import EvalConfig
    from methods.siamesenorm.evaluate import evaluate_runs, is_trivial

    probs = ["12+34=", "7-2=", "497*6=", "31*0=", "8*1=", "5*10=", "40*1="]
    rows = [{"prompt": p, "op": re.search(r"[+\-*]", p)[0], "answer": str(eval(p[:-1]))} for p in probs]
    assert [is_trivial(r) for r in rows] == [False, False, False, True, True, False, True]
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "arith_eval.jsonl", rows)
    tok = train_tokenizer(["0123456789+-*=\n abc"], kind="char")
    torch.manual_seed(0)
    m = SiameseNormForCausalLM(SiameseNormConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=24,
                                                 num_hidden_layers=1, num_attention_heads=2,
                                                 max_position_embeddings=32, norm_scheme="pre",
                                                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id))
    run = tmp_path / "runs" / "pre_lr0.01_s0"
    save_model(m, tok, run)
    (run / "train_summary.json").write_text(json.dumps(
        {"scheme": "pre", "lr": 0.01, "seed": 0, "val_loss": 1.0, "val_ppl": math.e, "diverged": False}))
    cfg = EvalConfig(tasks=["siamesenorm_arith"], arith_task="siamesenorm_arith", arith_metric="exact_match",
                     batch_size=4, limit=None, max_gen_toks=6)
    (row,) = evaluate_runs(cfg, [run], tmp_path / "data")
    assert row["n_arith_nontrivial"] == 4
    assert row["lm_eval"]["siamesenorm_arith"]["sample_len"] == 7
    assert row["lm_eval"]["siamesenorm_arith_nontrivial"]["sample_len"] == 4
    assert 0.0 <= row["arith_nontrivial_score"] <= 1.0 and 0.0 <= row["arith_score"] <= 1.0


def test_nontrivial_guard_metric_from_the_table():
    df = _table(seeds=(0, 1), post_hi=(3.5, 3.4))
    df["arith_nontrivial_score"] = 0.0
    df.loc[df.scheme == "post_pre", "arith_nontrivial_score"] = 0.02
    m = A.claim_metrics(df, ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["c3_arith_nontrivial_max"] == pytest.approx(0.02)
    m = A.claim_metrics(_table(), ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert m["c3_arith_nontrivial_max"] == m["c3_arith_max"]  # not split (paper scale): the whole score
