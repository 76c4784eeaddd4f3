"""The `fusionroute:` section of config/scales/<scale>.yaml (FusionRoute, "Token-Level LLM
Collaboration via FusionRoute", arXiv 2601.05106; the tiny domains and sizes are our design):
`Config` is the whole section, its sub-sections are the step configs; `is_paper` tells a step
whether it runs on the hub models (paper scale) or the tiny ones.

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
    """fusionroute.expert: the three domain experts (one shared init, so merging is meaningful).
    Paper scale (hub.experts set): nothing is trained, the section is empty (`{}`)."""
    model: ModelConfig | None = None
    train: TrainConfig | None = None
    n_train: PosInt | None = None
    init_seed: int | None = None         # one init for every expert (a shared base: merging is meaningful)


@dataclass
class RouterConfig:
    """fusionroute.router: the router LM + routing head, SFT loss L_lm + lambda_route * L_route."""
    train: TrainConfig
    lambda_route: NonNeg                 # λ of the routing loss
    informative_only: bool               # route loss on informative positions only (false: the ablation)
    n_train: PosInt
    init_seed: int                       # the tiny router's init; paper scale: the routing head's init
    model: ModelConfig | None = None     # the tiny router LM (paper scale: hub.router_base, no block)
    max_len: PosInt | None = None        # paper scale: SFT sequences cut to this many router tokens


@dataclass
class CDPOConfig:
    """fusionroute.cdpo: DPO on the normalised fused distribution after SFT."""
    train: TrainConfig
    n_prefs: PosInt                      # preference pairs
    beta: Positive                       # DPO β
    seed: int
    max_len: PosInt | None = None        # paper scale: pair sequences cut to this many router tokens


@dataclass
class EvalConfig:
    """fusionroute.eval: greedy decoding of every system, and the cost measurement."""
    max_new_tokens: PosInt
    batch_size: PosInt
    cost_ctx_len: PosInt
    cost_batch: PosInt
    cost_repeats: PosInt
    lm_eval_limit: PosInt | None = None  # paper scale: lm-eval `limit` (documents per task); null = all


@dataclass
class HubDataset:
    """One hub dataset of fusionroute.hub.datasets (paper scale): `role` add / rev / brk = router
    SFT records of that expert's domain (math / instruction following / code), `prefs` = CDPO
    preference pairs. The record format is recognised from the split's columns (data.py FORMATS)."""
    id: Annotated[str, Check(min_length=1)]
    subset: str | None
    split: Annotated[str, Check(min_length=1)]
    role: Literal["add", "rev", "brk", "prefs"]


@dataclass
class Hub:
    """fusionroute.hub: paper scale only (null / empty at smoke and tiny)."""
    router_base: str | None
    # domain -> hub id of its expert (paper scale), null below; every domain named
    experts: Annotated[dict[Literal["add", "rev", "brk"], str | None], Check(min_properties=3)]
    datasets: list[HubDataset]
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


def is_paper(hub: Hub, step: str) -> bool:
    """True at paper scale (hub router and experts named); a half-set hub section is an error."""
    named = [bool(hub.router_base)] + [bool(v) for v in hub.experts.values()]
    if any(named) and not all(named):
        raise InputError(f"{step}: fusionroute.hub must name the router base and every expert, or none "
                         f"(router_base {hub.router_base!r}, experts {hub.experts})")
    return all(named)


def tiny_block(value, key: str):
    """A tiny-scale config block that paper.yaml leaves out: one line when it is missing."""
    if value is None:
        raise InputError(f"missing config key '{key}' (needed without fusionroute.hub.router_base)")
    return value
