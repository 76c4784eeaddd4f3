"""The `asag` section of a scale file (config/scales/<scale>.yaml), declared once: ASAG
(arXiv 2606.15070), attention-state adaptive generation that stops a reasoning model's thinking
when further reasoning will not help, against vanilla, no-thinking and DEER (arXiv 2504.15895)
decoding on a tiny arithmetic reasoning task (our design). Every key is required.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNegInt, PosInt, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig


@dataclass
class DataConfig:
    """Generated problems with reasoning traces (rechecks, slips, loops)."""
    n_train: PosInt
    n_test: PosInt
    p_mul: Prob
    max_operand: Annotated[int, Check(minimum=9, maximum=99)]  # operands in [1, max_operand]
    max_rechecks: NonNegInt
    p_late_slip: Prob
    p_first_slip: Prob
    p_loop: Prob
    max_len: PosInt
    seed: int


@dataclass
class TrainRunConfig:
    """The tiny reasoning model, or a hub LRM (paper scale: nothing is trained)."""
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    hub_id: str | None


@dataclass
class Policy:
    """One decoding policy."""
    name: Annotated[str, Check(pattern="^[a-z0-9_]+$")]
    kind: Literal["vanilla", "nothink", "deer", "asag"]
    lam: Prob
    alpha: float                 # entropy-change threshold; "never" is a large number (JSON has no inf)
    max_jumps: NonNegInt
    inject: bool
    jump: bool


@dataclass
class DecodeConfig:
    budget: Annotated[int, Check(minimum=8)]  # generated tokens (thought + answer)
    probe_max: PosInt
    window_cap: PosInt           # entropy window: tokens since the previous ATP, at most this many
    n_last_layers: PosInt
    inject_weight: Prob
    n_problems: NonNegInt        # 0 = all test problems
    policies: Annotated[list[Policy], Check(min_items=1)]

    def policy(self, name: str) -> Policy:
        for p in self.policies:
            if p.name == name:
                return p
        raise InputError(f"unknown policy {name!r} (config: {[p.name for p in self.policies]})")


@dataclass
class AnalysisConfig:
    vanilla: str
    nothink: str
    deer: str
    asag: str
    nogate: str
    prestudy_threshold: float


@dataclass
class PaperConfig:
    """Paper scale: the models and benchmarks of the full study. The benchmarks are read through
    `datasets` (methods/asag/bench.py), not lm-eval: ASAG's controller needs its own generation loop."""
    models: list[str]
    benchmarks: list[str]
    think_ratio: Annotated[float, Check(exclusive_minimum=0, maximum=1)]


@dataclass
class Config:
    """ASAG (arXiv 2606.15070): data, the model, the decoding policies, claims, paper-scale names."""
    data: DataConfig
    train: TrainRunConfig
    decode: DecodeConfig
    analysis: AnalysisConfig
    paper: PaperConfig
