"""The top-level `model_pool:` section of config/scales/<scale>.yaml: the shared pool of tiny LMs
(different sizes and specialties, with measured costs) that UniScale (arXiv 2605.30898) routes
between and SCOPE (arXiv 2601.22323) extends with its own members (`scope.extra_members`).

At paper scale a member or the verifier names a hub id (`hub`) and is not trained; then `model`,
`train` (and `mix_arith`) may be null. The checks that relate keys (unique member names, hub or
model + train + mix_arith: `check_members`) run in `Config.__post_init__` (and in SCOPE's, on its
`extra_members`). Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check, NonNegInt, PosInt, Positive, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

Ops = Annotated[str, Check(pattern=r"^[-+*]+$")]   # the arithmetic operators drawn from


@dataclass
class TaskConfig:
    """model_pool.data: the task mixture (`tasks.py`): arithmetic with a rewrite-form step
    scratchpad (`Q:4+7*3=` -> `s:11*3;s:33;A:33`) and reversal in chunks of 3."""
    n_train: PosInt                      # per family
    n_test: PosInt                       # total, half per family
    max_ops: PosInt
    max_digits: PosInt
    ops: Ops
    rev_min: PosInt                      # reversal: string length range
    rev_max: PosInt
    seed: int


@dataclass
class MemberConfig:
    """model_pool.members[i] (and scope.extra_members[i]): a core Llama trained on the mixture, or
    a hub model (paper scale)."""
    name: Annotated[str, Check(pattern=r"^[A-Za-z0-9_]+$")]
    hub: str | None                      # paper scale: a hub id, nothing trained
    mix_arith: Prob | None               # share of arithmetic items in its training mixture (the rest: reversal)
    seed: int
    model: ModelConfig | None
    train: TrainConfig | None


Members = Annotated[list[MemberConfig], Check(min_items=1)]


def check_members(members: list[MemberConfig], key: str) -> None:
    """The checks that relate a member list's keys: names unique (a step finds its member by
    name), and each member either a hub id or a model to train (model + train + mix_arith)."""
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise InputError(f"config key '{key}': names must be unique, got {names}")
    for m in members:
        if m.hub is None and (m.model is None or m.train is None or m.mix_arith is None):
            raise InputError(f"config key '{key}.{m.name}': needs hub, or model+train+mix_arith")


@dataclass
class VerifierConfig:
    """model_pool.verifier: the process verifier, a core Llama read as a Y/N classifier at every
    step mark, or a hub model (paper scale)."""
    hub: str | None
    n_train: PosInt                      # synthetic sequences (gold + corrupted)
    n_sampled: NonNegInt                 # per policy member: completions sampled from it, exact labels
    temperature: Positive                # sampling temperature of those completions
    seed: int
    model: ModelConfig | None
    train: TrainConfig | None


@dataclass
class CostConfig:
    """model_pool.cost: the wall-time-per-token measurement."""
    ctx_len: PosInt
    batch: PosInt
    repeats: PosInt


@dataclass
class Config:
    """The shared model pool (methods/core/model_pool), used by uniscale and scope."""
    data: TaskConfig
    members: Members
    verifier: VerifierConfig
    cost: CostConfig

    def __post_init__(self):
        check_members(self.members, "model_pool.members")
