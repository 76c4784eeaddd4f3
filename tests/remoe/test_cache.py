"""Cache simulator and EOR: the cachetools library as reference for LRU/FIFO, a brute-force
optimum for Belady, Proposition 3.1 on many traces (tight at C = K, hand-checked case), and the
closed form EOR = K/E for uniform random routing."""
import itertools
import math

import numpy as np
import pytest

from methods.remoe import cache as C
from methods.remoe.analysis import AnalysisConfig, variant_metrics


def markov_trace(rng, T, E, K, stay):
    """Each expert of E_{t−1} is kept with probability `stay`, the rest drawn uniformly."""
    cur = rng.choice(E, K, replace=False)
    rows = [cur]
    for _ in range(T - 1):
        keep = [e for e in cur if rng.random() < stay]
        pool = np.setdiff1d(np.arange(E), keep)
        cur = np.concatenate([keep, rng.choice(pool, K - len(keep), replace=False)]).astype(int)
        rng.shuffle(cur)
        rows.append(cur)
    return np.stack(rows)


def uniform_trace(rng, T, E, K):
    return np.stack([rng.choice(E, K, replace=False) for _ in range(T)])


TRACES = [(seed, E, K, stay) for seed in range(3) for (E, K) in ((8, 2), (16, 4), (64, 6))
          for stay in (0.0, 0.5, 0.9)]


@pytest.mark.parametrize("policy", ["lru", "fifo"])
def test_native_matches_cachetools(policy):
    for seed, E, K, stay in TRACES:
        tr = markov_trace(np.random.default_rng(seed), 150, E, K, stay)
        for cap in (K, K + 1, 2 * K, E):
            a = C.simulate(tr, cap, policy, "native")
            b = C.simulate(tr, cap, policy, "cachetools")
            np.testing.assert_array_equal(a, b, err_msg=f"{policy} E{E} K{K} C{cap} stay{stay}")


def test_bound_holds_on_every_trace_and_capacity():
    for seed, E, K, stay in TRACES:
        tr = markov_trace(np.random.default_rng(100 + seed), 200, E, K, stay)
        b = C.bound(tr)
        for cap in range(K, E + 1):
            steady = C.simulate(tr, cap, "lru")[1:].mean()
            assert steady <= b + 1e-12, (E, K, cap, stay)


def test_bound_is_tight_at_capacity_k():
    # hand-checked case, K = 2: overlaps 1, 1, 0 → EOR = 1/3, bound = 2·(2/3) = 4/3;
    # LRU with C = 2 holds exactly E_{t−1}: fetches 1, 1, 2 → mean 4/3.
    tr = np.array([[0, 1], [1, 2], [2, 3], [0, 1]])
    assert C.eor(tr) == pytest.approx(1 / 3, abs=1e-15)
    np.testing.assert_array_equal(C.simulate(tr, 2, "lru"), [2, 1, 1, 2])
    assert C.simulate(tr, 2, "lru")[1:].mean() == pytest.approx(C.bound(tr), abs=1e-15)
    # ... and equality at C = K on every random trace
    for seed, E, K, stay in TRACES:
        tr = markov_trace(np.random.default_rng(200 + seed), 120, E, K, stay)
        assert C.simulate(tr, K, "lru")[1:].mean() == pytest.approx(C.bound(tr), abs=1e-12)


def test_bound_strict_with_spare_capacity():
    # A, B, A, B, ... with C = 2K: after the two cold steps nothing is fetched, while EOR = 0
    # gives the bound K. The bound is an upper bound, not an equality, once C > K.
    A, B = [0, 1, 2], [3, 4, 5]
    tr = np.array([A, B] * 10)
    assert C.eor(tr) == 0.0 and C.bound(tr) == 3.0
    m = C.simulate(tr, 6, "lru")
    assert m[0] == 3 and m[1] == 3 and m[2:].sum() == 0


def _brute_force_min(tr, cap):
    """Fewest total fetches over every eviction choice (exhaustive search)."""
    best = math.inf

    def go(t, resident, total):
        nonlocal best
        if total >= best:
            return
        if t == len(tr):
            best = total
            return
        need = set(tr[t].tolist())
        res = resident | need
        total += len(need - resident)
        extra = len(res) - cap
        if extra <= 0:
            go(t + 1, frozenset(res), total)
            return
        for victims in itertools.combinations(sorted(res - need), extra):
            go(t + 1, frozenset(res - set(victims)), total)

    go(0, frozenset(), 0)
    return best


def test_belady_is_the_optimum_and_below_lru_fifo():
    for seed in range(12):
        rng = np.random.default_rng(300 + seed)
        E, K, cap = 6, 2, 3 + seed % 2
        tr = markov_trace(rng, 9, E, K, 0.3)
        bel = C.simulate(tr, cap, "belady").sum()
        assert bel == _brute_force_min(tr, cap)
        assert bel <= C.simulate(tr, cap, "lru").sum()
        assert bel <= C.simulate(tr, cap, "fifo").sum()


def test_uniform_random_routing_gives_eor_k_over_e():
    # |E_t ∩ E_{t−1}| ~ Hypergeometric(E, K, K): mean K²/E, variance K (K/E)(1−K/E)(E−K)/(E−1);
    # for i.i.d. sets consecutive overlaps are independent, so EOR's s.d. is sqrt(var/(T−1))/K.
    for (E, K, T, seed) in ((16, 4, 20000, 0), (64, 6, 20000, 1), (8, 2, 20000, 2)):
        tr = uniform_trace(np.random.default_rng(seed), T, E, K)
        var = K * (K / E) * (1 - K / E) * (E - K) / (E - 1)
        sd = math.sqrt(var / (T - 1)) / K
        assert abs(C.eor(tr) - K / E) < 4 * sd, (E, K, C.eor(tr), K / E, sd)


def test_analysis_on_uniform_traces():
    # the analysis path (trace file layout (N, L, S, K)) gives K/E too, and its bound check passes
    rng = np.random.default_rng(5)
    N, L, S, E, K = 60, 2, 128, 16, 4
    topk = np.stack([np.stack([uniform_trace(rng, S, E, K) for _ in range(L)]) for _ in range(N)])
    tr = {"topk": topk, "n_experts": np.array(E), "ppl": np.array(2.0), "dom": np.zeros((N, S), int)}
    cfg = AnalysisConfig(base="base", remoe="remoe", ce_only="ce_only", no_trust="no_trust", capacities=[4, 8],
                         policies=["lru", "fifo", "belady"], backend="native", n_sim_docs=20)
    m = variant_metrics(tr, cfg)
    var = K * (K / E) * (1 - K / E) * (E - K) / (E - 1)
    sd = math.sqrt(var / (N * L * (S - 1))) / K
    assert abs(m["eor"] - K / E) < 4 * sd
    assert m["bound_violations"] == 0 and m["bound_gap_at_c_eq_k"] < 1e-12
    assert m["fetch_per_token"]["lru@4"] >= m["fetch_per_token"]["belady@4"] - 1e-12


def test_capacity_below_k_is_refused():
    with pytest.raises(ValueError, match="capacity 1 < K = 2"):
        C.simulate(np.array([[0, 1]]), 1)
