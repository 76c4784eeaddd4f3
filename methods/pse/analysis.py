"""Rates with Wilson CIs, persistence fits, compounding vs its closed form, defence effects,
the claim metrics and the figure."""
from __future__ import annotations

import dataclasses

import numpy as np

from .scenarios import TYPES
from .stats import compounding, fit_hazard, slope_ci, wilson

SIM_NOTE = ("SimAgent is a scripted simulator with planted probabilities standing in for an "
            "instruction-tuned tool-using LLM agent (and for the D1 verifier); at this scale the "
            "metric checks that the harness recovers the planted value, not any real model's behaviour.")


@dataclasses.dataclass
class AnalysisConfig:
    conf: float          # confidence level of every interval (0.95)
    min_cells_in_ci: float  # informational: the claim threshold lives in claims.yaml


def planted_rate(p: dict, ctype: str, N: int, T: int, P: int, t: int) -> float:
    if not N:
        return 0.0
    s = p["susceptibility"][ctype] * (1.0 if T else p["trigger_gain"]) * (p["p_carry"] if P else 1.0)
    return s * (1 - p["hazard"].get(ctype, 0.0)) ** t


def _rate(k, n, conf):
    lo, hi = wilson(int(k), int(n), conf)
    return {"k": int(k), "n": int(n), "rate": k / n if n else float("nan"), "lo": lo, "hi": hi}


def analyse(scen: dict, labels: dict, pipe: list, defs: dict, planted: dict | None,
            primary: str, cfg: AnalysisConfig) -> tuple[dict, dict]:
    """`labels[agent]` = {id: [0/1 per probe turn]}; `pipe` = {id: [0/1 per stage]};
    `defs[d]` = {id: {"final": 0/1, "draft": 0/1, "flagged": bool}}. Returns (metrics, tables)."""
    conf = cfg.conf
    tables: dict = {"rates": [], "persistence": [], "compounding": [], "defence": []}
    m: dict = {"notes": {}}
    # ---- factorial cells at the first probe (t = 1), per agent
    n0_max, n1_max, susc = 0.0, 0.0, {}
    in_ci = []
    for agent, lab in labels.items():
        cells: dict = {}
        for i, y in lab.items():
            sc = scen[i]
            if sc["kind"] != "factorial":
                continue
            cells.setdefault((sc["type"], sc["N"], sc["T"], sc["P"]), []).append(y)
        for (c, N, T, P), ys in sorted(cells.items()):
            r = _rate(sum(y[0] for y in ys), len(ys), conf)
            ever = float(np.mean([max(y) for y in ys]))
            row = {"agent": agent, "type": c, "N": N, "T": T, "P": P, **r, "ever": ever}
            if planted is not None and agent == primary:
                row["planted"] = planted_rate(planted, c, N, T, P, 1)
                in_ci.append(r["lo"] - 1e-12 <= row["planted"] <= r["hi"] + 1e-12)
            if N == 0:
                n0_max = max(n0_max, ever)
            else:
                n1_max = max(n1_max, ever)
            tables["rates"].append(row)
        bound = [y[0] for (c, N, T, P), ys in cells.items() if N for y in ys]
        susc[agent] = float(np.mean(bound)) if bound else float("nan")
    m["cells_within_ci_frac"] = float(np.mean(in_ci)) if in_ci else None
    m["n_cells_checked"] = len(in_ci)
    # "no contamination without name binding" says nothing when no agent was contaminated with it
    # either (e.g. an agent that never follows the note): then the check is vacuous, not passed
    m["n0_max_rate"] = n0_max if n1_max > 0 else None
    if n1_max == 0 and labels:
        m["notes"]["n0_max_rate"] = (f"vacuous: no trial with name binding (N = 1) was contaminated "
                                     f"either (N = 0 max {n0_max})")
    m["susceptibility"] = susc
    m["susceptibility_min"] = min(susc.values()) if susc else None
    m["susceptibility_max"] = max(susc.values()) if susc else None
    # ---- persistence (primary agent, N = T = 1, P = 0)
    lab = labels.get(primary, {})
    slopes_ok, h_err, flat = [], None, []
    for c in TYPES:
        ys = np.array([y for i, y in lab.items() if scen[i]["kind"] == "persistence" and scen[i]["type"] == c])
        if ys.size == 0:
            continue
        n, H = ys.shape
        for t in range(H):
            tables["persistence"].append({"type": c, "t": t + 1, **_rate(ys[:, t].sum(), n, conf),
                                          **({"planted": planted_rate(planted, c, 1, 1, 0, t + 1)} if planted else {})})
        decay = ys[:, -1].mean() / ys[:, 0].mean() if ys[:, 0].mean() > 0 else float("nan")
        m[f"decay_{c}"] = float(decay)
        if c == "factual":
            s, h = fit_hazard(list(ys.sum(axis=0)), n)
            m["factual_fit_s"], m["factual_fit_h"] = s, h
            if planted is not None:
                h_err = abs(h - planted["hazard"].get("factual", 0.0))
        else:
            b, lo, hi = slope_ci(ys, conf)
            m[f"slope_{c}"] = [b, lo, hi]
            slopes_ok.append(lo - 1e-12 <= 0.0 <= hi + 1e-12)
            if ys[:, 0].sum() == 0:  # nothing contaminated at t = 1: "no decay" would be vacuous
                flat.append(c)
    m["factual_h_abs_err"] = h_err
    m["nonfactual_no_decay"] = bool(slopes_ok) and all(slopes_ok) if not flat else None
    if flat:
        m["notes"]["nonfactual_no_decay"] = (f"vacuous: no persistence trial of type(s) {flat} was "
                                             "contaminated at the first probe, so there is nothing to decay")
    # ---- compounding
    if pipe:
        ys = np.array(list(pipe.values()))
        n, S = ys.shape
        rates = [_rate(ys[:, s].sum(), n, conf) for s in range(S)]
        closed = compounding(planted["q"], planted["p_carry"], planted["q"], S) if planted else [None] * S
        for s in range(S):
            tables["compounding"].append({"stage": s + 1, **rates[s], "closed_form": closed[s]})
        m["compounding_rates"] = [r["rate"] for r in rates]
        m["compounding_factor"] = rates[-1]["rate"] / rates[0]["rate"] if rates[0]["rate"] > 0 else None
        m["compounding_closed_form"] = closed
        m["compounding_within_ci"] = (all(r["lo"] - 1e-12 <= c <= r["hi"] + 1e-12 for r, c in zip(rates, closed))
                                      if planted else None)
    # ---- defences
    if defs:
        panel = {i for i in next(iter(defs.values())) if scen[i]["kind"] == "defence"}
        for d, rows in defs.items():
            k = sum(rows[i]["final"] for i in panel)
            ctrl = {mm: [rows[i]["flagged"] for i in rows if scen[i]["kind"] == "control" and scen[i]["mention"] == mm]
                    for mm in (0, 1)}
            tables["defence"].append({"defence": d, **_rate(k, len(panel), conf),
                                      "fpr_mention": float(np.mean(ctrl[1])) if ctrl[1] else None,
                                      "fpr_nomention": float(np.mean(ctrl[0])) if ctrl[0] else None})
            m[f"contamination_{d}"] = k / len(panel) if panel else None
        if "selfverify" in defs:
            sv = defs["selfverify"]
            drafts = [i for i in panel if sv[i]["draft"]]
            removed = sum(1 - sv[i]["final"] for i in drafts)
            r = _rate(removed, len(drafts), conf)
            m["d1_reduction"] = r["rate"]
            m["d1_reduction_ci"] = [r["lo"], r["hi"]]
            m["d1_reduction_ci_contains_planted"] = (r["lo"] - 1e-12 <= planted["catch"] <= r["hi"] + 1e-12
                                                     if planted else None)
            if "none" in defs and m.get("contamination_none"):
                m["d1_reduction_vs_none"] = 1 - m["contamination_selfverify"] / m["contamination_none"]
            d1 = [row for row in tables["defence"] if row["defence"] == "selfverify"][0]
            m["d1_fpr_clean"] = max(x for x in (d1["fpr_mention"], d1["fpr_nomention"]) if x is not None)
        if "keyword" in defs:
            kw = [row for row in tables["defence"] if row["defence"] == "keyword"][0]
            m["d2_fpr_mention"], m["d2_fpr_nomention"] = kw["fpr_mention"], kw["fpr_nomention"]
    if planted is not None:
        for k in ("cells_within_ci_frac", "n0_max_rate", "factual_h_abs_err", "nonfactual_no_decay",
                  "compounding_within_ci", "d1_reduction_ci_contains_planted", "d2_fpr_mention",
                  "d2_fpr_nomention"):
            m["notes"][k] = SIM_NOTE
        m["notes"]["compounding_factor"] = (f"{SIM_NOTE} Planted per-hop carry-over {planted['p_carry']} and "
                                            f"base/re-injection rate {planted['q']} (parameters: the abstract versions disagree); the "
                                            "paper's 3× (1.9× in the arXiv digest) is not checkable here.")
        m["notes"]["susceptibility_min"] = f"{SIM_NOTE} The value is the planted mixture, not a measurement of a model."
    return m, tables


def _err(rows):
    return [[max(0.0, r["rate"] - r["lo"]) for r in rows], [max(0.0, r["hi"] - r["rate"]) for r in rows]]


def figure(tables: dict, metrics: dict, path, planted: dict | None) -> None:
    from methods.core.plots import figure as fig_, save

    fig, ax = fig_(2, 2, figsize=(10, 7.5))
    a = ax[0, 0]
    rows = [r for r in tables["rates"] if "planted" in r] or tables["rates"]
    x = np.arange(len(rows))
    a.errorbar(x, [r["rate"] for r in rows], yerr=_err(rows),
               fmt="o", ms=3, label="measured (Wilson 95%)")
    if rows and "planted" in rows[0]:
        a.plot(x, [r["planted"] for r in rows], "rx", label="planted")
    a.set_xticks(x[::4], [f"{r['type'][:4]}" for r in rows][::4], fontsize=7)
    a.set_title("(a) factorial cells (N,T,P) at t=1")
    a.set_ylabel("contamination rate")
    a.legend(fontsize=7)
    b = ax[0, 1]
    for c in TYPES:
        pr = [r for r in tables["persistence"] if r["type"] == c]
        if pr:
            b.plot([r["t"] for r in pr], [r["rate"] for r in pr], "o-", ms=3, label=c)
            if "planted" in pr[0]:
                b.plot([r["t"] for r in pr], [r["planted"] for r in pr], "k:", lw=0.8)
    b.set_title("(b) persistence c(t) (dotted: planted)")
    b.set_xlabel("probe turn t")
    b.legend(fontsize=7)
    c_ = ax[1, 0]
    cr = tables["compounding"]
    if cr:
        st = [r["stage"] for r in cr]
        c_.errorbar(st, [r["rate"] for r in cr], yerr=_err(cr),
                    fmt="o-", label="measured")
        if cr[0]["closed_form"] is not None:
            c_.plot(st, [r["closed_form"] for r in cr], "r--", label="closed form")
        c_.set_xticks(st)
    c_.set_title(f"(c) pipeline compounding, factor {metrics.get('compounding_factor') or float('nan'):.2f}×")
    c_.set_xlabel("stage")
    c_.legend(fontsize=7)
    d = ax[1, 1]
    dr = tables["defence"]
    if dr:
        xs = np.arange(len(dr))
        d.bar(xs - 0.2, [r["rate"] for r in dr], 0.2, label="contamination (panel)")
        d.bar(xs, [r["fpr_mention"] or 0 for r in dr], 0.2, label="flag rate, clean mention")
        d.bar(xs + 0.2, [r["fpr_nomention"] or 0 for r in dr], 0.2, label="flag rate, clean no-mention")
        d.set_xticks(xs, [r["defence"] for r in dr])
    d.set_title("(d) defences")
    d.legend(fontsize=7)
    who = "planted-rate simulator (SimAgent)" if planted else "agents"
    save(fig, path, caption=(
        f"PSE contamination harness, {who}. (a) rate at the first probe per factorial cell "
        "(type × N × T × P) with Wilson 95% CIs; (b) contamination over 10 probe turns per payload "
        "type; (c) stage-wise contamination of a 4-agent pipeline vs the closed form "
        "c_s = 1 − (1 − p_B c_{s−1})(1 − q); (d) defences: contamination after D1 (context-isolated "
        "self-verification) and D2 (keyword filter), and their flag rates on clean controls. "
        + (SIM_NOTE if planted else "")))
