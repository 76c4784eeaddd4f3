"""ASAG's signals against references: entropy vs scipy.stats.entropy, captured attention vs an
attention recomputed from the layers' Q/K projections and transformers' eager attentions, the
controller's actions on hand-constructed entropy traces, and DEER's stopping rule by hand."""
import math
from dataclasses import replace

import numpy as np
import pytest
import scipy.stats
import torch

from methods.asag.config import Policy
from methods.asag.signals import (
    CONTINUE,
    EXIT,
    INJECT,
    JUMP,
    answer_confidence,
    asag_decide,
    attention_state,
    deer_stop,
    inject_probs,
    row_entropy,
    window_entropy,
)

torch.set_num_threads(1)


def test_row_entropy_matches_scipy():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(17, 0.3), size=12)
    p[0, :5] = 0.0          # exact zeros: 0·log 0 = 0
    p[0] /= p[0].sum()
    ours = row_entropy(torch.tensor(p)).numpy()
    np.testing.assert_allclose(ours, scipy.stats.entropy(p, axis=-1), rtol=1e-12, atol=1e-12)


def test_window_entropy_is_mean_of_normalised_causal_row_entropies():
    rng = np.random.default_rng(1)
    heads, T = 3, 10
    a = np.zeros((heads, T, T))
    for h in range(heads):
        for i in range(T):
            a[h, i, :i + 1] = rng.dirichlet(np.ones(i + 1))
    rows = [4, 7, 9]
    ref = [np.mean([scipy.stats.entropy(a[h, i, :i + 1]) / math.log(i + 1) for i in rows]) for h in range(heads)]
    np.testing.assert_allclose(window_entropy(torch.tensor(a), rows).numpy(), ref, rtol=1e-12)
    # uniform causal attention has normalised entropy exactly 1
    u = torch.tril(torch.ones(T, T, dtype=torch.float64)) / torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    np.testing.assert_allclose(window_entropy(u[None].double(), range(1, T)).numpy(), [1.0], rtol=1e-12)


def test_trap_compares_mass_on_previous_and_current_thought():
    T = 8
    a = torch.zeros(1, 2, T, T, dtype=torch.float64)
    a[0, :, 6:, 2:4] = 0.4      # rows 6,7 put 0.8 on the previous thought [2,4) ...
    a[0, :, 6, 4:7] = 0.2 / 3   # ... and 0.2 on the current one [4,8)
    a[0, :, 7, 4:8] = 0.05
    st = attention_state([a], [6, 7], (2, 4), (4, 8), n_last=1)
    assert st["trap"] and st["mass_prev"] == pytest.approx(0.8) and st["mass_cur"] == pytest.approx(0.2)
    st = attention_state([a], [6, 7], None, (4, 8), n_last=1)
    assert not st["trap"]


def run_trace(trace, pol):
    """Drive the decision rule over a hand-made list of (C, H, trap) at successive ATPs, stopping
    at an exit, as the decoding loop does."""
    H1, jumps, actions = None, 0, []
    for C, H, trap in trace:
        act, _, jumps = asag_decide(C, H, H1, trap, jumps, pol)
        H1 = H if H1 is None else H1
        actions.append(act)
        if act == EXIT:
            break
    return actions


def test_controller_actions_follow_entropy_traces():
    pol = Policy("asag", kind="asag", lam=0.95, alpha=-0.1, max_jumps=2, inject=True, jump=True)
    # confident at the first ATP: DEER-style exit
    assert run_trace([(0.97, 10.0, False)], pol) == [EXIT]
    # entropy falls by 20% (< α) while unsure → inject, then confident with the drop kept → exit
    assert run_trace([(0.5, 10.0, False), (0.6, 8.0, False), (0.96, 8.5, True)], pol) == [CONTINUE, INJECT, EXIT]
    # confident but entropy has not fallen (ΔH = −0.05 ≥ α) → no exit, continue
    assert run_trace([(0.5, 10.0, False), (0.99, 9.5, False)], pol) == [CONTINUE, CONTINUE]
    # entropy rises with a trap three times: jump, jump, then the jump budget s = 2 is spent → exit
    tr = [(0.3, 10.0, False)] + [(0.3, 11.0, True)] * 3
    assert run_trace(tr, pol) == [CONTINUE, JUMP, JUMP, EXIT]
    # no trap → continue; ΔH exactly α is not "< α"
    assert run_trace([(0.3, 10.0, False), (0.3, 9.0, False)], pol) == [CONTINUE, CONTINUE]
    # ablations: no injection → continue; no jump → continue
    no_inject, no_jump = replace(pol, name="x", inject=False), replace(pol, name="x", jump=False)
    assert run_trace([(0.5, 10.0, False), (0.6, 8.0, False)], no_inject) == [CONTINUE, CONTINUE]
    assert run_trace([(0.3, 10.0, False), (0.3, 11.0, True)], no_jump) == [CONTINUE, CONTINUE]


def test_no_gate_is_deer():
    rng = np.random.default_rng(2)
    pol = Policy("nogate", kind="asag", lam=0.95, alpha=1e9, max_jumps=2, inject=False, jump=False)
    for _ in range(200):
        tr = [(float(rng.uniform(0.8, 1.0)), float(rng.uniform(5, 15)), bool(rng.integers(2))) for _ in range(5)]
        acts = run_trace(tr, pol)
        deer = [EXIT if deer_stop(c, pol.lam) else CONTINUE for c, _, _ in tr]
        k = deer.index(EXIT) + 1 if EXIT in deer else len(deer)
        assert acts == deer[:k]


def test_deer_stopping_rule_by_hand():
    probs = [0.9, 0.99, 0.97]
    C = answer_confidence(probs)
    assert C == pytest.approx((0.9 + 0.99 + 0.97) / 3) and C == pytest.approx(0.95333333)
    assert deer_stop(C, 0.95) and not deer_stop(C, 0.96)
    assert not deer_stop(0.95, 0.95)        # strictly greater
    assert answer_confidence([]) == 0.0


def test_injection_mixture_closed_form():
    p = torch.softmax(torch.randn(26, generator=torch.Generator().manual_seed(0)), -1)
    q = inject_probs(p, [5, 7, 5], 0.05)
    ref = 0.95 * p
    ref[5] += 0.025
    ref[7] += 0.025
    torch.testing.assert_close(q, ref)
    assert float(q.sum()) == pytest.approx(1.0)
