"""The `fusionroute:` section of config/scales/<scale>.yaml (FusionRoute, "Token-Level LLM
Collaboration via FusionRoute", arXiv 2601.05106; the tiny domains and sizes are our design):
`Config` is the whole section, its sub-sections are the step configs; and the paper-scale guard
of the steps this tiny-scale module cannot run with hub models.

Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig


@dataclass
class DataConfig:
    """fusionroute.data: the generated domains add / rev / brk (and comp, held out from the
    experts); methods/fusionroute/data.py."""
    n_train: PosInt                      # per domain
    n_test: PosInt                       # per domain
    add_digits: PosInt                   # operands have 1..add_digits digits
    rev_min: PosInt
    rev_max: PosInt
    brk_min: PosInt
    brk_max: PosInt
    home_frac: Prob                      # an expert's share of its own domain (the rest: the other two)
    seed: int


@dataclass
class ExpertConfig:
    """fusionroute.expert: the three domain experts (one shared init, so merging is meaningful)."""
    model: ModelConfig
    train: TrainConfig
    n_train: PosInt
    init_seed: int                       # one init for every expert (a shared base: merging is meaningful)


@dataclass
class RouterConfig:
    """fusionroute.router: the router LM + routing head, SFT loss L_lm + lambda_route * L_route."""
    model: ModelConfig
    train: TrainConfig
    lambda_route: NonNeg                 # λ of the routing loss
    informative_only: bool               # route loss on informative positions only (false: the ablation)
    n_train: PosInt
    init_seed: int


@dataclass
class CDPOConfig:
    """fusionroute.cdpo: DPO on the normalised fused distribution after SFT."""
    train: TrainConfig
    n_prefs: PosInt                      # preference pairs
    beta: Positive                       # DPO β
    seed: int


@dataclass
class EvalConfig:
    """fusionroute.eval: greedy decoding of every system, and the cost measurement."""
    max_new_tokens: PosInt
    batch_size: PosInt
    cost_ctx_len: PosInt
    cost_batch: PosInt
    cost_repeats: PosInt


@dataclass
class Hub:
    """fusionroute.hub: paper scale only (null / empty at smoke and tiny)."""
    router_base: str | None
    # domain -> hub id of its expert (paper scale), null below; every domain named
    experts: Annotated[dict[Literal["add", "rev", "brk"], str | None], Check(min_properties=3)]
    datasets: list[str]
    lm_eval_tasks: list[str]


@dataclass
class Config:
    """FusionRoute (arXiv 2601.05106)."""
    data: DataConfig
    expert: ExpertConfig
    router: RouterConfig
    cdpo: CDPOConfig
    eval: EvalConfig
    # independent replicates of the whole pipeline (data, experts, router, CDPO, evaluation):
    # replicate s moves every seed of the section by SEED_STRIDE·s (s = 0: the seeds as written)
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
    hub: Hub


SEED_STRIDE = 1000


def replicate_section(section: dict, seed: int) -> dict:
    """A step section for replicate `seed`: its `seed` / `init_seed` moved by SEED_STRIDE·seed."""
    out = dict(section)
    for k in ("seed", "init_seed"):
        if k in out:
            out[k] = int(out[k]) + SEED_STRIDE * int(seed)
    return out


def paper_guard(hub: Hub, step: str) -> None:
    if hub.router_base or any(hub.experts.values()):
        raise InputError(f"{step}: paper scale (hub router {hub.router_base!r}) needs the GPU "
                         "implementation of FusionRoute training, which this tiny-scale module does not have")
