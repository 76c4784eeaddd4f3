"""The `scope:` section of config/scales/<scale>.yaml: SCOPE ("Models Under SCOPE: Scalable and
Controllable Routing via Pre-hoc Reasoning", arXiv 2601.22323): an outcome predictor over
retrieved anchors (SFT, then GRPO) and alpha-controlled two-stage routing.

Its pool is the shared model pool (top-level `model_pool:`) plus its own `extra_members`, declared
like the pool's members. Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive, Prob
from methods.core.model_pool.config import Members, Ops, check_members
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig


@dataclass
class QueryConfig:
    """scope.outcomes.queries: generated arithmetic / reversal queries from the shared task
    generator, split into anchors / train / test."""
    source: str                          # "generated" or the hub dataset id (paper: not run here)
    n_anchor: PosInt
    n_train: PosInt
    n_test: PosInt
    max_ops: PosInt
    max_digits: PosInt
    ops: Ops
    rev_min: PosInt
    rev_max: PosInt
    seed: int


@dataclass
class PoolUse:
    """scope.outcomes.pool: the routing candidates and their measured costs."""
    members: Annotated[list[str], Check(min_items=2)]   # routing candidates, in order
    unseen: str                          # held out from predictor training
    price_per_10k: NonNeg                # USD per 1M output tokens per 10k params (ours)
    max_new_tokens: PosInt
    k_retrieve: PosInt                   # anchors retrieved per query (cosine top-k)

    def __post_init__(self):
        if self.unseen not in self.members:
            raise InputError(f"config key 'scope.outcomes.pool.unseen': {self.unseen!r} is not among "
                             f"pool.members {self.members}")


@dataclass
class OutcomeConfig:
    """scope.outcomes: every pool model's greedy outcome on every query, and its anchors."""
    queries: QueryConfig
    pool: PoolUse


@dataclass
class GRPOConfig:
    """scope.predictor.grpo: GRPO after SFT (the reward, G and beta are our choices)."""
    steps: PosInt
    prompts: PosInt                      # prompts per step
    group: Annotated[int, Check(minimum=2)]   # G samples per prompt
    lr: Positive
    beta: NonNeg                         # k3 KL weight to the frozen SFT model
    temperature: Positive
    seed: int


@dataclass
class PredictorConfig:
    """scope.predictor: the outcome predictor (a core Llama; paper: a hub model)."""
    hub: str | None
    k_prompt: NonNegInt                  # anchors in the prompt (0: the no-anchor ablation's)
    seed: int
    model: ModelConfig
    sft: TrainConfig
    grpo: GRPOConfig


@dataclass
class RouteConfig:
    """scope.route: Stage I anchor statistics and the two-stage rule of the public code
    (gamma' = gamma(1 + 2(1 - alpha)), w' = w(0.5 + 0.5 alpha)) on an alpha grid; budget mode."""
    k_r: PosInt
    gamma: Positive
    w: Prob
    alpha_step: Annotated[float, Check(exclusive_minimum=0, maximum=1)]
    budgets: Annotated[list[Positive], Check(min_items=1)]   # fractions of the most expensive model's cost
    knn_k: PosInt                        # kNN router baseline
    seed: int


@dataclass
class Config:
    """SCOPE (arXiv 2601.22323): outcome estimator over anchors and alpha-controlled routing."""
    extra_members: Members               # SCOPE's own pool members, trained by the shared pool's trainer
    outcomes: OutcomeConfig
    predictor: PredictorConfig
    route: RouteConfig

    def __post_init__(self):
        check_members(self.extra_members, "scope.extra_members")
