"""Expert-overlap ratio (EOR) and an expert-cache simulator over routing traces.

A trace is a sequence of expert sets E_1..E_T (one request, one MoE layer; caches start empty
per request = "request isolation"). At step t the cache first *touches* the experts of E_t that
are resident (a hit refreshes their recency), then fetches the missing ones, evicting by the
policy when it holds more than `capacity` experts. The number fetched is the step's misses.

    EOR = mean_{t≥2} |E_t ∩ E_{t−1}| / K

Proposition 3.1 of arXiv 2605.27081 (conditions as we read them): with LRU and capacity C ≥ K, the mean fetches per token over
t ≥ 2 satisfy N̄_fetch ≤ K (1 − EOR). Reason: after step t−1 the K most recently used experts
are exactly E_{t−1}, all resident since C ≥ K, so step t fetches at most |E_t \\ E_{t−1}|. At C = K
the cache holds exactly E_{t−1}, so the bound is an equality on every trace. The cold-start
step t = 1 (K fetches) is `simulate(...)[0]`, not in N̄_fetch.

Policies: "lru", "fifo" (eviction by insertion order; hits do not refresh), "belady" (offline
optimum: evict the resident expert not needed now whose next use is farthest). Two backends for
lru/fifo: "native" (an OrderedDict, no dependency) and "cachetools" (the library's LRUCache /
FIFOCache driven through the same touch-then-fetch protocol); tests check they agree.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

POLICIES = ("lru", "fifo", "belady")
BACKENDS = ("native", "cachetools")


def overlaps(trace: np.ndarray) -> np.ndarray:
    """|E_t ∩ E_{t−1}| for t = 2..T; trace (T, K) integer expert ids (distinct per row)."""
    tr = np.asarray(trace)
    if tr.shape[0] < 2:
        return np.zeros(0, dtype=np.int64)
    return (tr[1:, :, None] == tr[:-1, None, :]).any(-1).sum(-1)


def eor(trace: np.ndarray) -> float:
    """Expert-overlap ratio of one trace (T, K)."""
    ov = overlaps(trace)
    return float(ov.mean() / np.asarray(trace).shape[1]) if ov.size else float("nan")


def bound(trace: np.ndarray) -> float:
    """Prop. 3.1's upper bound K (1 − EOR) on mean fetches per token over t ≥ 2."""
    return np.asarray(trace).shape[1] * (1.0 - eor(trace))


def _next_use(trace: np.ndarray, n_experts: int) -> np.ndarray:
    """nxt[t, e] = first step s > t with e ∈ E_s (T if none)."""
    T = trace.shape[0]
    nxt = np.full((T, n_experts), T, dtype=np.int64)
    cur = np.full(n_experts, T, dtype=np.int64)
    for t in range(T - 1, -1, -1):
        nxt[t] = cur
        cur[trace[t]] = t
    return nxt


def _library_cache(policy: str, capacity: int):
    import cachetools  # the simulator of record for LRU/FIFO (pinned in pyproject.toml)

    cls = {"lru": cachetools.LRUCache, "fifo": cachetools.FIFOCache}[policy]
    return cls(maxsize=capacity)


def simulate(trace: np.ndarray, capacity: int, policy: str = "lru",
             backend: str = "native") -> np.ndarray:
    """Misses (fetches) per step of one trace (T, K) → int array (T,)."""
    tr = np.asarray(trace, dtype=np.int64)
    T, K = tr.shape
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if capacity < K:
        raise ValueError(f"capacity {capacity} < K = {K}: a step could not hold its experts")
    misses = np.zeros(T, dtype=np.int64)
    if policy == "belady":
        nxt = _next_use(tr, int(tr.max()) + 1 if T else 1)
        resident: set[int] = set()
        for t in range(T):
            need = set(tr[t].tolist())
            miss = need - resident
            misses[t] = len(miss)
            resident |= miss
            while len(resident) > capacity:
                victim = max((e for e in resident if e not in need), key=lambda e: (nxt[t, e], e))
                resident.remove(victim)
        return misses
    if backend == "cachetools":
        cache = _library_cache(policy, capacity)
        for t in range(T):
            row = tr[t].tolist()
            hits = [e for e in row if e in cache]
            for e in hits:
                cache[e]  # noqa: B018 — a read is a "use": refreshes LRU recency (not FIFO)
            for e in row:
                if e not in hits:
                    cache[e] = True  # insert; the library evicts when full
            misses[t] = K - len(hits)
        return misses
    od: OrderedDict[int, None] = OrderedDict()
    for t in range(T):
        row = tr[t].tolist()
        hits = [e for e in row if e in od]
        if policy == "lru":
            for e in hits:
                od.move_to_end(e)
        for e in row:
            if e not in hits:  # a hit evicted by this step's own fetches was already used
                od[e] = None
                if len(od) > capacity:
                    od.popitem(last=False)
        misses[t] = K - len(hits)
    return misses
