"""Claim metrics (summary.json), the test table and the figure of the TSGD study."""
from __future__ import annotations

import math

from methods.core.stats import paired_bootstrap_diff

SIM_NOTE = ("tiny/smoke: solver and reflector are our seeded simulator (SimSolver/SimReflector) "
            "on MATH-lite; it stands in for a real LLM solving and reflecting on MATH, so this checks "
            "the optimiser's logic and the phenomenon as modelled, not the paper's MATH/AIME numbers")


def claim_metrics(base: dict, runs: dict[str, dict], traces: dict[str, list[dict]], n_types: int,
                  flat_from: float, simulated: bool) -> dict:
    """Checks (1)-(4) of claims.yaml. `runs[variant]` is a train step's JSON, `traces[variant]` its rows."""
    full, nov, loc = runs.get("full"), runs.get("no_verify"), runs.get("local_only")
    curve = {int(r["memory_size"]): float(r["test_acc"]) for r in base["rag_curve"]}
    big = max(curve)
    m = {"zero_shot_test_acc": base["zero_shot_test_acc"], "rag_test_acc_final": curve[big],
         "rag_final_memory": big}
    m.update({f"{v}_test_acc": r["test_acc"] for v, r in runs.items()})
    m["c1_gain_over_zero_shot"] = full["test_acc"] - base["zero_shot_test_acc"]
    m["c1_gain_over_rag"] = full["test_acc"] - curve[big]
    # paired over the test problems (every system answers the same ones): a percentile bootstrap
    # of the mean per-problem difference, and the number of problems on which the two differ.
    # The interval's unit is the test problem of one optimisation run (one seed of the simulator /
    # of TSGD's sampling): the paper-scale headline claims replicate over seeds (claims.yaml), so
    # this interval alone does not decide them.
    m["intervals"] = {}
    m["c1_discordant_over_zero_shot"] = m["c1_discordant_over_rag"] = None   # no per-problem outcomes
    for key, ref in (("c1_gain_over_zero_shot", "zero_shot_test_ok"), ("c1_gain_over_rag", "rag_final_test_ok")):
        a, b = full.get("test_ok"), base.get(ref)
        if a and b and len(a) == len(b):
            m["intervals"][key] = paired_bootstrap_diff([float(x) for x in a], [float(x) for x in b], unit="item")
            m[key.replace("gain", "discordant")] = int(sum(x != y for x, y in zip(a, b)))
    # (2) the budget holds at every step (for every budgeted variant) and the final size is in [K, C]
    m["c2_budget_respected"] = bool(all(
        r["capacity"] is None or (r["max_size"] <= r["capacity"]
                                  and all(int(t["lib_size"]) <= r["capacity"] for t in traces[v]))
        for v, r in runs.items()))
    if all(r["max_size"] == 0 for r in runs.values() if r["capacity"] is not None):
        m["c2_budget_respected"] = None  # no rule was ever accepted: the budget was never tested
    m["c2_final_size"] = len(full["library"]["rules"])
    m["full_accepted_ops"] = int(sum(bool(o["accepted"]) for o in full["ops"]))
    m["c2_final_size_in_range"] = bool(n_types <= m["c2_final_size"] <= full["capacity"])
    # (3) verification (simulator only: its labels say which rule is wrong or instance-specific)
    for k in ("c3_no_verify_bad_or_instance_frac", "c3_full_minus_no_verify", "c3_local_only_instance_accepted",
              "c3_full_instance_accepted", "c3_local_admits_full_rejects"):
        m[k] = None
    if nov is not None and simulated:
        kinds = nov["library_kinds"]
        m["c3_no_verify_bad_or_instance_frac"] = (
            sum(k in ("bad", "instance") for k in kinds) / len(kinds) if kinds else float("nan"))
        m["c3_full_minus_no_verify"] = full["test_acc"] - nov["test_acc"]
    if loc is not None and simulated:
        n_loc = sum(o["accepted"] and o["kind"] == "instance" for o in loc["ops"])
        n_full = sum(o["accepted"] and o["kind"] == "instance" for o in full["ops"])
        m["c3_local_only_instance_accepted"], m["c3_full_instance_accepted"] = n_loc, n_full
        m["c3_local_admits_full_rejects"] = bool(n_loc > 0 and n_full == 0)
    # (4) saturation: RAG non-increasing from 200 stored experiences on; TSGD's val curve flat
    m["c4_rag_range"] = max(curve.values()) - min(curve.values())   # 0: stored experiences change nothing
    after = [curve[k] for k in sorted(curve) if k >= 200]
    m["c4_rag_change_after_200"] = after[-1] - after[0] if len(after) >= 2 else float("nan")
    m["c4_rag_nonincreasing_after_200"] = (bool(all(b <= a for a, b in zip(after, after[1:])))
                                           if len(after) >= 2 else None)
    ev = [t for t in traces["full"] if t["val_acc"] not in (None, "")]
    tail_rows = ev[int(len(ev) * flat_from):]
    tail = [float(t["val_acc"]) for t in tail_rows]
    m["c4_tsgd_val_range_tail"] = (max(tail) - min(tail)) if len(tail) >= 2 else float("nan")
    m["c4_tail_evals"] = len(tail)
    # ops accepted after the first tail evaluation: with none, the library no longer changes and
    # its (deterministic) validation accuracy is constant by construction
    m["c4_tail_accepted_ops"] = None
    if tail_rows:
        first = int(tail_rows[0]["step"])
        m["c4_tail_accepted_ops"] = int(sum(int(t["n_accepted"]) for t in traces["full"] if int(t["step"]) > first))
    if not m["intervals"]:
        del m["intervals"]
    m["notes"] = _notes(m, simulated)
    return m


def _notes(m: dict, simulated: bool) -> dict:
    sim = SIM_NOTE if simulated else "real LLM endpoint"
    n = {k: sim for k in ("c1_gain_over_zero_shot", "c1_gain_over_rag", "c3_no_verify_bad_or_instance_frac",
                          "c3_full_minus_no_verify", "c3_local_admits_full_rejects",
                          "c4_rag_nonincreasing_after_200", "c4_tsgd_val_range_tail")}
    n["c1_gain_over_zero_shot"] += ("; absolute accuracy points. The simulator's gain is set by its "
                                    "parameters (35% bare, ~85% with the right rule), not measured on MATH")
    n["c4_rag_nonincreasing_after_200"] += ("; static RAG stores the solver's own unverified answers, "
                                            "wrong same-type examples mislead the simulated solver")
    n["c2_budget_respected"] = "bookkeeping of the optimiser; independent of the simulator"
    if m["c2_budget_respected"] is None:
        n["c2_budget_respected"] += "; vacuous here: no budgeted variant ever accepted an op (empty libraries)"
    return n


def figure(runs: dict, traces: dict, base: dict, path: str) -> None:
    from methods.core.plots import figure as fig_, save

    fig, (a1, a2, a3) = fig_(1, 3, figsize=(14, 4))
    for v, tr in traces.items():
        pts = [(int(t["step"]), float(t["val_acc"])) for t in tr if t["val_acc"] not in (None, "")]
        a1.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=v)
        a2.plot([int(t["step"]) for t in tr], [int(t["lib_size"]) for t in tr], label=v)
    a1.axhline(base["zero_shot_test_acc"], color="k", ls=":", label="zero-shot (test)")
    a1.set(xlabel="TSGD step", ylabel="validation accuracy", title="accuracy over steps")
    a2.set(xlabel="TSGD step", ylabel="|L| (rules)", title="library size over steps")
    for v, r in runs.items():
        if r["capacity"] is not None:
            a2.axhline(r["capacity"], color="gray", ls="--", lw=0.7)
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    cur = base["rag_curve"]
    a3.plot([c["memory_size"] for c in cur], [c["test_acc"] for c in cur], marker="o", label="static RAG (top-3)")
    a3.axhline(runs["full"]["test_acc"], color="C0", ls="--", label="TSGD full")
    a3.axhline(base["zero_shot_test_acc"], color="k", ls=":", label="zero-shot")
    a3.set(xlabel="stored experiences", ylabel="test accuracy", title="append-only memory")
    a3.legend(fontsize=7)
    save(fig, path, "TSGD: validation accuracy (left) and library size (middle) per step for each "
         "variant (overlapping lines: variants that reached the same library); test accuracy of append-only static RAG vs memory size (right). Tiny/smoke: the "
         "solver and reflector are our simulator on MATH-lite, not real LLMs on MATH.")


def nan_to_none(m: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in m.items()}
