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
    """scope.outcomes.queries: tiny/smoke: generated arithmetic / reversal queries from the shared
    task generator, split into anchors / train / test (`source: generated` and every generator
    key). Paper: `source` is the released outcome dataset (hub id of SCOPE-60K, arXiv 2601.22323
    §4; its `anchor` and `test` splits, every pool model's recorded outcome per question) and the
    generator keys are absent."""
    source: str                          # "generated", or the outcome dataset's hub id (paper)
    n_anchor: PosInt | None = None
    n_train: PosInt | None = None
    n_test: PosInt | None = None
    max_ops: PosInt | None = None
    max_digits: PosInt | None = None
    ops: Ops | None = None
    rev_min: PosInt | None = None
    rev_max: PosInt | None = None
    seed: int | None = None

    GENERATOR_KEYS = ("n_anchor", "n_train", "n_test", "max_ops", "max_digits", "ops", "rev_min", "rev_max",
                      "seed")

    @property
    def generated(self) -> bool:
        return self.source == "generated"

    def __post_init__(self):
        given = [k for k in self.GENERATOR_KEYS if getattr(self, k) is not None]
        if self.generated and len(given) != len(self.GENERATOR_KEYS):
            missing = [k for k in self.GENERATOR_KEYS if k not in given]
            raise InputError(f"config key 'scope.outcomes.queries': source 'generated' needs {missing}")
        if not self.generated and given:
            raise InputError(f"config key 'scope.outcomes.queries': {given} are generator keys, unused with the "
                             f"outcome dataset {self.source!r} (its splits are the dataset's)")


@dataclass
class PoolUse:
    """scope.outcomes.pool: the routing candidates and their costs. Generated queries: measured
    costs from the members' greedy runs, priced ∝ params (`price_per_10k`, `max_new_tokens`).
    Outcome dataset: the recorded token counts priced with `prices` (USD per 1M input / output
    tokens per member, OpenRouter's as in the official code's config/pricing.json)."""
    members: Annotated[list[str], Check(min_items=2)]   # routing candidates, in order
    unseen: str                          # held out from predictor training
    k_retrieve: PosInt                   # anchors retrieved per query (cosine top-k)
    price_per_10k: NonNeg | None = None  # generated: USD per 1M output tokens per 10k params (ours)
    max_new_tokens: PosInt | None = None  # generated: the members' greedy generation length
    prices: dict[str, Annotated[list[NonNeg], Check(min_items=2, max_items=2)]] | None = None  # dataset: name → [in, out]
    embedder: str | None = None          # retrieval encoder (hub id, last-token pooled); None: char n-gram TF-IDF

    def __post_init__(self):
        if self.unseen not in self.members:
            raise InputError(f"config key 'scope.outcomes.pool.unseen': {self.unseen!r} is not among "
                             f"pool.members {self.members}")
        if self.prices is not None:
            missing = [m for m in self.members if m not in self.prices]
            if missing:
                raise InputError(f"config key 'scope.outcomes.pool.prices': no price for {missing}")


@dataclass
class OutcomeConfig:
    """scope.outcomes: every pool model's outcome on every query (generated: its greedy run;
    paper: the dataset's record), and each query's anchors."""
    queries: QueryConfig
    pool: PoolUse

    def __post_init__(self):
        p = self.pool
        if self.queries.generated:
            for k in ("price_per_10k", "max_new_tokens"):
                if getattr(p, k) is None:
                    raise InputError(f"config key 'scope.outcomes.pool.{k}': needed with generated queries")
            if p.prices is not None:
                raise InputError("config key 'scope.outcomes.pool.prices': prices of generated queries are "
                                 "measured (price_per_10k), not set")
        else:
            if p.prices is None:
                raise InputError(f"config key 'scope.outcomes.pool.prices': needed with the outcome dataset "
                                 f"{self.queries.source!r}")
            given = [k for k in ("price_per_10k", "max_new_tokens") if getattr(p, k) is not None]
            if given:
                raise InputError(f"config key 'scope.outcomes.pool': {given} are unused with the outcome dataset "
                                 f"(its outcomes are recorded, priced by pool.prices)")


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
class DecodeConfig:
    """scope.predictor.decode: sampling of the released predictor's reasoning and prediction
    (the official `scripts/scope_inference.py`: temperature, top-p 0.95, ≤ 1,536 new tokens; its
    top-k 20 is not applied, the shared LLM interface samples without top-k)."""
    max_new_tokens: PosInt
    temperature: NonNeg                  # 0 = greedy
    top_p: Annotated[float, Check(exclusive_minimum=0, maximum=1)]
    batch_size: PosInt
    seed: int


@dataclass
class PredictorConfig:
    """scope.predictor: the outcome predictor: a core Llama trained here (SFT, then GRPO: `model`,
    `sft`, `grpo`) or, with `hub`, the released predictor used as it is (`decode`)."""
    hub: str | None
    k_prompt: NonNegInt                  # anchors in the prompt (0: the no-anchor ablation's)
    seed: int
    model: ModelConfig | None = None
    sft: TrainConfig | None = None
    grpo: GRPOConfig | None = None
    decode: DecodeConfig | None = None

    def __post_init__(self):
        if self.hub is None:
            for k in ("model", "sft", "grpo"):
                if getattr(self, k) is None:
                    raise InputError(f"config key 'scope.predictor.{k}': needed to train the predictor "
                                     "(predictor.hub is null)")
            if self.decode is not None:
                raise InputError("config key 'scope.predictor.decode': only for a hub predictor "
                                 "(the trained one predicts greedily)")
        else:
            if self.decode is None:
                raise InputError(f"config key 'scope.predictor.decode': needed to sample the hub predictor "
                                 f"{self.hub!r}")
            given = [k for k in ("model", "sft", "grpo") if getattr(self, k) is not None]
            if given:
                raise InputError(f"config key 'scope.predictor': {given} are unused with the hub predictor "
                                 f"{self.hub!r} (it is used as released, not trained here)")


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
    # extra members trained to answer directly (`A:<answer>`, no scratchpad): terse "non-reasoning"
    # members, cheaper per query than a scratchpad member of a lower per-token price on some queries
    direct_members: list[str]
    # replicates of the trained predictor (SFT, its no-anchor ablation, GRPO): the claims' outer
    # unit; the pool and outcome table are shared by every seed (the claims are about the router)
    seeds: Annotated[list[NonNegInt], Check(min_items=1)]
    outcomes: OutcomeConfig
    predictor: PredictorConfig
    route: RouteConfig

    def __post_init__(self):
        check_members(self.extra_members, "scope.extra_members")
        names = {m.name: m for m in self.extra_members}
        bad = [n for n in self.direct_members if n not in names or names[n].hub is not None]
        if bad:
            raise InputError(f"config key 'scope.direct_members': {bad} are not trained extra members "
                             f"(extra_members: {sorted(names)})")
        if len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"config key 'scope.seeds': seeds must be unique, got {self.seeds}")


SEED_STRIDE = 1000   # replicate s trains with predictor.seed + 1000·s and grpo.seed + 1000·s


def for_seed(cfg: PredictorConfig, s: int) -> PredictorConfig:
    """The predictor config of replicate `s` (s = 0 is the configured one)."""
    from dataclasses import replace

    if cfg.grpo is None:
        return replace(cfg, seed=cfg.seed + SEED_STRIDE * s)
    return replace(cfg, seed=cfg.seed + SEED_STRIDE * s, grpo=replace(cfg.grpo, seed=cfg.grpo.seed + SEED_STRIDE * s))
