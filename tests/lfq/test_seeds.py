"""Quantization seeds as the claims' replicates: the packed quantize / final steps write, per
variant, exactly what one step per variant wrote; the analysis turns per-seed claim metrics
into replicate records whose t interval is the closed form; C3's guard bounds C3 by the
triangle inequality."""
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from methods.core import cli
from methods.core.claims import evaluate_claims, load_claims
from methods.core.models import ModelConfig, build_model, load_model, save_model
from methods.core.tokenizer import train_tokenizer
from methods.lfq.__main__ import build_parser
from methods.lfq.analysis import claim_metrics, seed_metrics
from methods.lfq.config import AnalysisConfig
from methods.lfq.ptq import QuantConfig, final_block, quantize_model

CFG = AnalysisConfig(mse_variant="omni", headmse_variant="omni-headmse", lfq_variant="omni-lfq")
BUCKETS = [10, 20, 30]
VARIANTS = ["fp", "rtn", "omni", "omni-headmse", "omni-lfq"]
QUANT = QuantConfig(bits=3, group_size=16, epochs=1, batch_size=4, lr=1e-2, chunk=256, gptq_block_size=128,
                    gptq_percdamp=0.01, gptq_act_order=False, forward_batch=4, seed=3)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    tok = train_tokenizer(["s0123456789 the cat sees a dog."], "char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_seq_len=32), tok, 0)
    d = tmp_path_factory.mktemp("lfqseeds")
    save_model(model, tok, d / "fp")
    ids = torch.randint(3, len(tok), (8, 16))
    torch.save(ids, d / "calib.pt")
    return d, ids


def _run(args):
    assert cli.main(build_parser(), args) == 0


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(v, sb[k]) for k, v in sa.items())


def test_packed_steps_equal_one_run_per_variant(base):
    """`quantize --methods rtn gptq omni` and `final --objectives lfq headmse` (two objectives on
    one loaded baseline, its final block restored in between) give bit-identical weights to
    quantizing / re-quantizing each variant on its own from the FP model."""
    d, ids = base
    cfg = json.dumps(dataclasses.asdict(QUANT))
    outs = [str(d / m) for m in ("rtn", "gptq", "omni")]
    _run(["quantize", "--config", cfg, "--base", str(d / "fp"), "--calib", str(d / "calib.pt"),
          "--methods", "rtn", "gptq", "omni", "--out", *outs, "--threads", "1"])
    _run(["final", "--config", cfg, "--base", str(d / "fp"), "--calib", str(d / "calib.pt"),
          "--objectives", "lfq", "headmse", "--quantized", outs[2], outs[2],
          "--out", str(d / "omni-lfq"), str(d / "omni-headmse"), "--threads", "1"])
    fp, _ = load_model(d / "fp", training=True)
    for m in ("rtn", "gptq", "omni"):
        want, _, _ = quantize_model(fp, ids, m, QUANT)
        assert _same(load_model(d / m, training=True)[0], want), m
    omni, _ = load_model(d / "omni", training=True)
    for obj in ("lfq", "headmse"):
        want, _, _ = final_block(fp, omni, ids, obj, QUANT)
        got = load_model(d / f"omni-{obj}", training=True)[0]
        assert _same(got, want), obj
    # the two objectives differ only in the final block, and differ there
    a, b = (load_model(d / f"omni-{o}", training=True)[0].state_dict() for o in ("lfq", "headmse"))
    diff = {k for k in a if not torch.equal(a[k], b[k])}
    assert diff and all(k.startswith("model.layers.1.") for k in diff)


def _rows(em, ppl, n=100):
    """em: {(setting, variant): [EM at each length]} → evaluation rows (hits drawn to match)."""
    rows = []
    for (s, v), es in em.items():
        r = {"setting": s, "variant": v, "ppl": ppl[(s, v)], "kl": 0.0 if v == "fp" else 0.01,
             "top1_agree": 1.0 if v == "fp" else 0.95, "em_hits": {}}
        for k, e in zip(BUCKETS, es):
            r[f"em_{k}"] = e
            r["em_hits"][str(k)] = [1] * round(e * n) + [0] * (n - round(e * n))
        rows.append(r)
    return rows


def _seed(gains, ppl_lfq=1.45):
    """One seed: at w2g32 the MSE baseline loses 0.1 / 0.2 / 0.3 EM, LFQ gains `gains` over it."""
    em = {("w2g32", "fp"): [1.0, 1.0, 1.0], ("w2g32", "rtn"): [0.6, 0.5, 0.4],
          ("w2g32", "omni"): [0.9, 0.8, 0.7], ("w2g32", "omni-headmse"): [0.9, 0.8, 0.7]}
    em[("w2g32", "omni-lfq")] = [b + g for b, g in zip(em[("w2g32", "omni")], gains)]
    ppl = {("w2g32", "fp"): 1.40, ("w2g32", "rtn"): 1.6, ("w2g32", "omni"): 1.46, ("w2g32", "omni-headmse"): 1.46,
           ("w2g32", "omni-lfq"): ppl_lfq}
    return _rows(em, ppl)


def test_seed_replicates_are_the_per_seed_metrics_with_the_closed_form_t_interval():
    from scipy.stats import t

    gains = {0: [0.05, 0.07, 0.10], 1: [0.06, 0.08, 0.12], 2: [0.055, 0.075, 0.11]}
    rows = {s: _seed(g) for s, g in gains.items()}
    m = seed_metrics(rows, CFG, BUCKETS)
    for k in ("c2b_em_gap_min", "c2c_em_gap_min_step", "c3_ppl_rel_diff_max"):
        per = [claim_metrics(rows[s], CFG, BUCKETS)[k] for s in sorted(rows)]
        assert m["replicates"][k]["values"] == pytest.approx(per) and m["replicates"][k]["unit"] == "seed"
        assert m[k] == pytest.approx(np.mean(per))
    c2b = [min(g) for g in gains.values()]
    assert m["replicates"]["c2b_em_gap_min"]["values"] == pytest.approx(c2b)
    res = {c["id"]: c for c in evaluate_claims(load_claims("methods/lfq/claims.yaml"), m, "tiny")["claims"]}
    half = t.ppf(0.975, 2) * np.std(c2b, ddof=1) / math.sqrt(3)
    iv = res["C2b"]["interval"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((np.mean(c2b) - half, np.mean(c2b) + half))
    assert res["C2b"]["verdict"] == "reproduced" and res["C2b"]["n"] == 3
    assert m["c2c_em_gap_min_step"] == pytest.approx(0.02)   # steps +0.02/+0.03, +0.02/+0.04, +0.02/+0.035
    # C3 (|1.45 − 1.46| / 1.46 in every seed: zero width) stays undecided rather than certain
    assert res["C3"]["undecided_by"] in ("no interval", "guard failed")


def test_c3_guard_bounds_c3_by_the_triangle_inequality():
    """c3_ppl_fp_distance_max = max_s (|L − F| + |M − F|) / M ≥ c3_ppl_rel_diff_max = max_s |L − M| / M
    for any perplexities; below 3% the claim holds by construction, which the guard refuses."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        f, mm, ll = 1 + rng.random(3) * 0.1
        em = {("w2g32", v): [0.5] * 3 for v in VARIANTS}
        ppl = {("w2g32", "fp"): f, ("w2g32", "rtn"): 2.0, ("w2g32", "omni"): mm, ("w2g32", "omni-headmse"): mm,
               ("w2g32", "omni-lfq"): ll}
        m = claim_metrics(_rows(em, ppl), CFG, BUCKETS)
        assert m["c3_ppl_fp_distance_max"] == pytest.approx((abs(ll - f) + abs(mm - f)) / mm)
        assert m["c3_ppl_rel_diff_max"] <= m["c3_ppl_fp_distance_max"] + 1e-12
    # the former guard read whole-model RTN: RTN far from FP while both compared models sit at FP
    em = {("w2g32", v): [0.5] * 3 for v in VARIANTS}
    ppl = {("w2g32", "fp"): 1.4, ("w2g32", "rtn"): 2.0, ("w2g32", "omni"): 1.401, ("w2g32", "omni-headmse"): 1.4,
           ("w2g32", "omni-lfq"): 1.402}
    m = claim_metrics(_rows(em, ppl), CFG, BUCKETS)
    assert m["rtn_lowbit_ppl_rel_increase"] > 0.03 and m["c3_ppl_fp_distance_max"] < 0.03
    res = {c["id"]: c for c in evaluate_claims(load_claims("methods/lfq/claims.yaml"), m, "tiny")["claims"]}
    assert res["C3"]["undecided_by"] == "guard failed"


def test_c2c_precondition_is_read_over_seeds():
    """No setting whose gain at the longest length has a t interval over seeds excluding 0: C2c is
    declared inconclusive; a consistent gain lifts the declaration."""
    noisy = {s: _seed(g) for s, g in {0: [0, 0, 0.05], 1: [0, 0, -0.04], 2: [0, 0, 0.01]}.items()}
    assert "c2c_em_gap_min_step" in seed_metrics(noisy, CFG, BUCKETS)["inconclusive"]
    steady = {s: _seed(g) for s, g in {0: [0, 0, 0.05], 1: [0, 0, 0.06], 2: [0, 0, 0.07]}.items()}
    assert "c2c_em_gap_min_step" not in seed_metrics(steady, CFG, BUCKETS).get("inconclusive", {})
