"""The `uniscale:` section of config/scales/<scale>.yaml: UniScale (arXiv 2605.30898), online joint
optimisation of model routing and test-time scaling (TTS) with LinUCB over a replay table.

The pool of models it routes between is the top-level `model_pool:` section
(methods/core/model_pool/config.py). Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive

Policy = Literal["uis_linucb", "uis_linucb_joint", "route_linucb", "tts_linucb", "random", "greedy_linear",
                 "knn", "best_fixed", "oracle"]
POLICIES: tuple[str, ...] = get_args(Policy)


@dataclass
class TableConfig:
    """uniscale.table: the offline replay table, every (query, arm) run once. Arms = pool member x
    TTS setting: greedy, BoN-N for each N in `bon` (verifier-weighted majority vote; BoN-k uses
    the first k of the same N_max samples) and verifier-guided step-level beam search."""
    n_queries: PosInt                # test queries of the pool's data in the stream
    bon: list[PosInt]                # BoN sample counts N
    beam_cp: NonNegInt               # beam: continuations sampled per kept beam and round (CP)
    beam_bs: PosInt                  # beam: beams kept per round (BS)
    max_rounds: PosInt               # beam: at most this many step rounds
    temperature: Positive            # sampling temperature of BoN and beam (1.0: ancestral sampling)
    max_new_tokens: PosInt
    chunk: PosInt                    # sequences per generate / verifier batch
    # eFLOPs = compute FLOPs + I * bytes moved (arXiv 2605.30898, Propositions 3.1-3.3)
    intensity: NonNeg                # arithmetic intensity I
    bytes_w: PosInt                  # bytes per weight
    bytes_kv: PosInt                 # bytes per KV-cache entry
    seed: int


@dataclass
class BanditConfig:
    """uniscale.bandit: LinUCB over the unified action space (a = argmax θᵀx + α·sqrt(xᵀA⁻¹x),
    A = λI + Σxxᵀ), its route-only / TTS-only restrictions and the baselines, replayed on the
    table. Reward r = w1·correct + w2·verifier + w3·(1 − normalised log10 eFLOPs)."""
    alpha: NonNeg                    # exploration width α
    lam: Positive                    # ridge λ
    weights: dict[str, Annotated[list[NonNeg], Check(min_items=3, max_items=3)]]   # name -> (w1, w2, w3)
    policies: Annotated[list[Policy], Check(min_items=1)]
    seeds: Annotated[list[int], Check(min_items=1)]   # stream orders
    route_tts: str                   # route-only arms: every model with this TTS setting
    tts_model: str                   # TTS-only arms: every TTS setting of this pool member
    knn_k: PosInt
    feat_dim: PosInt                 # context φ(q) dimension (PCA of the prompt features)
    # dynamic run: cost → quality weights at t = switch_frac·T
    switch_frac: Annotated[float, Check(exclusive_minimum=0, exclusive_maximum=1)]
    # [lo, lo + range] of log10 eFLOPs; null = fit on the table
    cost_norm: Annotated[list[float], Check(min_items=2, max_items=2)] | None


@dataclass
class QuerySet:
    """One benchmark: a hub dataset id (or a local hub-layout directory), its split, the first
    `n` rows (null: all), the name it carries as the query family."""
    name: str
    dataset: str
    split: str
    n: PosInt | None


@dataclass
class QueriesConfig:
    """uniscale.queries: the benchmark sets that form the query stream, concatenated in order."""
    sets: Annotated[list[QuerySet], Check(min_items=1)]


@dataclass
class Config:
    """UniScale (arXiv 2605.30898); its pool is the top-level model_pool section. `queries`: the
    benchmark sets of the query stream (paper scale); null streams the pool's generated test queries."""
    table: TableConfig
    bandit: BanditConfig
    queries: QueriesConfig | None = None
