"""The tiny-scale summary over training seeds: C2's ρ per seed (closed-form Spearman values), their
mean as the metric, the per-seed values as the claims engine's replicates, the guards' ranges the
smallest over the seeds, and the engine deciding C2a / C2b / C4 from the t interval over the seeds
(checked against a Student-t interval written out with scipy's quantile)."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr, t

from methods.core import cli
from methods.core.claims import evaluate_claims, load_claims
from methods.core.results import read_json
from methods.pid.__main__ import build_parser
from methods.pid.analysis import summarize
from methods.pid.config import AnalysisConfig

FAMS = ("RED", "U_TXT", "U_VIS", "SYN")
N = 12
CLAIMS = Path(__file__).resolve().parents[2] / "methods/pid/claims.yaml"


def _seed(perm_s, spread, delta_scale=1.0):
    """One training seed's PID and interventions: Δ_vision = delta_scale · k / N for config k,
    S = the rank permutation `perm_s` scaled by `spread`, U_txt = 1 − k / N (ρ = −1 exactly)."""
    pid, inter = {}, []
    for k in range(N):
        name = f"mix{k // 3}_ck{k % 3}"
        pid[name] = {"pooled": {"R": 0.1, "U_vis": 0.1, "U_txt": float(1 - k / N), "S": spread * float(perm_s[k]),
                                "I": 1.0}}
        inter.append({"config": name, "mix": f"mix{k // 3}", "checkpoint": f"ck{k % 3}", "acc": 0.9,
                      "delta_vision": float(delta_scale * k / N)})
    fam = {f: {"R": 0.0, "U_vis": 0.0, "U_txt": 0.0, "S": 0.0, "I": 1.0} for f in FAMS}
    for f, a in zip(FAMS, ("R", "U_txt", "U_vis", "S")):
        fam[f][a] = 1.0
    pid["mix0_ck0"]["families"] = fam
    return pid, inter


def _perms():
    """Seed 0: S in Δ's order; seed 1: one adjacent swap (Σd² = 2); seed 2: four adjacent swaps
    (Σd² = 8). Spearman's closed form for distinct ranks: ρ = 1 − 6 Σd² / (N (N² − 1))."""
    ident = np.arange(N)
    one = ident.copy(); one[[0, 1]] = one[[1, 0]]
    four = ident.copy()
    for i in (0, 2, 4, 8):
        four[[i, i + 1]] = four[[i + 1, i]]
    closed = [1 - 6 * d2 / (N * (N * N - 1)) for d2 in (0, 2, 8)]
    return (ident, one, four), closed


def _reweight(gains):
    runs = {k: [{"seed": s, "syn_acc": 0.8 + (g if k == "pid" else 0.0)} for s, g in enumerate(gains)]
            for k in ("uniform", "pid", "random")}
    return {"runs": runs, "gap_family_counts": {"RED": 1, "U_TXT": 0, "U_VIS": 0, "SYN": 2}, "base_syn_acc": 0.7}


def _t_interval(x, level=0.95):
    """Student-t interval of the mean written out: mean ± t_{(1+level)/2, n−1} · sd / √n."""
    x = np.asarray(x, float)
    half = t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return x.mean() - half, x.mean() + half


def _summary(tmp_path, seeds, gains=(0.0, 0.01, 0.02)):
    out = tmp_path / "s.json"
    summarize(AnalysisConfig(profile_config="mix0_ck0", min_configs=N), [p for p, _ in seeds], [i for _, i in seeds],
              _reweight(gains), out, tmp_path / "t.md", tmp_path / "p.png", tmp_path / "q.png",
              seeds=[str(s) for s in range(len(seeds))])
    m = read_json(out)
    return m, {r["id"]: r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"]}


def test_c2_per_seed_rho_and_replicates(tmp_path):
    perms, closed = _perms()
    seeds = [_seed(perms[0], 1.0), _seed(perms[1], 0.5), _seed(perms[2], 2.0)]
    # the closed form is scipy's Spearman ρ on these series
    for p, c in zip(perms, closed):
        assert spearmanr(p, np.arange(N)).statistic == pytest.approx(c, abs=1e-12)
    m, rows = _summary(tmp_path, seeds)
    rep_s, rep_u = m["replicates"]["c2_rho_s_delta"], m["replicates"]["c2_rho_utxt_delta"]
    assert rep_s["values"] == pytest.approx(closed, abs=1e-12) and rep_s["unit"] == "seed"
    assert rep_s["ids"] == ["s0", "s1", "s2"]
    assert m["c2_rho_s_delta"] == pytest.approx(np.mean(closed), abs=1e-12)
    assert rep_u["values"] == pytest.approx([-1.0] * 3, abs=1e-12) and m["c2_rho_utxt_delta"] == pytest.approx(-1.0)
    assert m["c2_rho_per_seed"]["s1"]["S"] == pytest.approx(closed[1], abs=1e-12)
    # guards: the smallest range over the seeds (seed 1's S spans 0.5 · 11; U_txt and Δ span 11 / N in every seed)
    assert m["c2_s_range"] == pytest.approx(0.5 * 11) and m["c2_delta_range"] == pytest.approx(11 / N)
    assert m["c2_utxt_range"] == pytest.approx(11 / N)
    assert m["c1_families_largest_atom"] == 4 and m["c2_n_seeds"] == 3 and m["c2_n_configs"] == N
    assert len(m["c2_points"]) == 3 * N and {p["seed"] for p in m["c2_points"]} == {"0", "1", "2"}
    # C2a: the t interval over the 3 seeds' ρ; mean 0.98834, half-width 4.303 · 0.014557 / √3 = 0.03616
    lo, hi = _t_interval(closed)
    assert rows["C2a"]["interval"]["lo"] == pytest.approx(lo, abs=1e-12)
    assert rows["C2a"]["interval"]["hi"] == pytest.approx(hi, abs=1e-12)
    assert lo == pytest.approx(0.95218, abs=1e-5) and rows["C2a"]["n"] == 3 and rows["C2a"]["interval"]["unit"] == "seed"
    assert rows["C2a"]["verdict"] == "reproduced"
    # every seed ρ = −1: a zero-width interval, which the engine does not read as certainty
    assert rows["C2b"]["verdict"] == "inconclusive" and rows["C2b"]["undecided_by"] == "no interval"
    # C4: per-seed paired differences 0, 0.01, 0.02: mean 0.01 ± 4.303 · 0.01 / √3 = [−0.0148, 0.0348]
    assert m["replicates"]["c4_syn_acc_gain"]["values"] == pytest.approx([0.0, 0.01, 0.02], abs=1e-12)
    assert m["c4_syn_acc_gain"] == pytest.approx(0.01, abs=1e-12) and m["c4_uniform_syn_acc"] == pytest.approx(0.8)
    lo4, hi4 = _t_interval([0.0, 0.01, 0.02])
    assert rows["C4"]["interval"]["lo"] == pytest.approx(lo4, abs=1e-12) and lo4 == pytest.approx(-0.01484, abs=1e-4)
    assert rows["C4"]["verdict"] == "inconclusive" and rows["C4"]["undecided_by"] == "interval straddles"


def test_c2_guard_is_the_smallest_spread_over_seeds(tmp_path):
    """Two seeds span 11/12 in Δ_vision, one only 0.04 · 11/12 = 0.0367 < 0.05: the guard reads the
    smallest range, so C2a is guard-failed although every seed's ρ is 1 (the ranks are
    scale-free) and the pooled range would pass."""
    perms, _ = _perms()
    seeds = [_seed(perms[0], 1.0), _seed(perms[0], 1.0, delta_scale=0.04), _seed(perms[0], 1.0)]
    m, rows = _summary(tmp_path, seeds, gains=(-0.03, -0.02, -0.025))
    assert m["replicates"]["c2_rho_s_delta"]["values"] == pytest.approx([1.0] * 3, abs=1e-12)
    assert m["c2_delta_range"] == pytest.approx(0.04 * 11 / N, abs=1e-12)
    assert rows["C2a"]["verdict"] == "inconclusive" and rows["C2a"]["undecided_by"] == "guard failed"
    # C4 with every seed below 0: t interval −0.025 ± 4.303 · 0.005 / √3 = [−0.0374, −0.0126] < 0
    lo, hi = _t_interval([-0.03, -0.02, -0.025])
    assert hi == pytest.approx(-0.01258, abs=1e-4) and rows["C4"]["interval"]["hi"] == pytest.approx(hi, abs=1e-12)
    assert rows["C4"]["verdict"] == "not_reproduced"


def test_aggregate_needs_one_interventions_file_per_pid_file(tmp_path, capsys):
    perms, _ = _perms()
    pid, inter = _seed(perms[0], 1.0)
    files = {}
    for name, obj in (("s0.json", {"pid": pid}), ("i0.json", {"configs": inter}), ("i1.json", {"configs": inter}),
                      ("rw.json", _reweight((0.0, 0.01, 0.02)))):
        (tmp_path / name).write_text(json.dumps(obj))
        files[name] = str(tmp_path / name)
    cfg = json.dumps({"profile_config": "mix0_ck0", "min_configs": N})
    rc = cli.main(build_parser(), ["aggregate", "--config", cfg, "--pid", files["s0.json"],
                                   "--interventions", files["i0.json"], files["i1.json"], "--reweight", files["rw.json"],
                                   "--summary", str(tmp_path / "sum.json"), "--table", str(tmp_path / "t.md"),
                                   "--fig_profiles", str(tmp_path / "p.png"), "--fig_synergy", str(tmp_path / "q.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "1 --pid files but 2 --interventions" in err[0]
    assert not (tmp_path / "sum.json").exists()
