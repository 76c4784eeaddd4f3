"""The `rl_sgd` section of a scale file (config/scales/<scale>.yaml), declared once: SGD vs AdamW
in reinforcement learning with verifiable rewards (arXiv 2602.07729) — a warm-started tiny LM per
width, GRPO under each optimizer and learning rate, the sparsity of the updates (after arXiv
2505.11711), an SFT contrast and a trl cross-check.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive
from methods.core.results import InputError

# an Adam β (β1 or β2): [0, 1)
Beta = Annotated[float, Check(minimum=0, exclusive_maximum=1)]


@dataclass
class Grid:
    """The learning-rate grid of each optimizer (GRPO runs at every width)."""
    adamw: Annotated[list[Positive], Check(min_items=1)]
    sgd: Annotated[list[Positive], Check(min_items=1)]


@dataclass
class Ablation:
    """Learning rates of the ablations at the widest width: Adam without momentum (β1 = 0),
    Adam without adaptivity (no second moment), SGD with momentum."""
    adam_nomom: Positive
    adam_noadapt: Positive
    sgd_mom: Positive


@dataclass
class PromptsConfig:
    """The verifiable addition task and the SFT contrast task (2-digit × 1-digit products)."""
    max_operand: Annotated[int, Check(minimum=2, maximum=100)]
    n_eval: PosInt
    mul_max_a: Annotated[int, Check(minimum=2, maximum=100)]
    mul_n_eval: PosInt
    seed: int


@dataclass
class ArchConfig:
    """The tiny Llama-style LM (d_model = the width; d_ff = ff_mult · width)."""
    n_layers: PosInt
    n_heads: PosInt
    ff_mult: Positive
    max_seq_len: Annotated[int, Check(minimum=12)]
    init_std: Positive


@dataclass
class WarmstartConfig:
    """The AdamW SFT warm start of each width's base model (steps per width, in `widths` order)."""
    steps: Annotated[list[NonNegInt], Check(min_items=2)]
    arch: ArchConfig
    lr: Positive
    batch_size: PosInt
    seed: int


@dataclass
class GRPOConfig:
    """GRPO: G samples per prompt, group-normalised advantages, clipped ratio surrogate, optional
    k3 KL (β), loss normalised per token or per sequence."""
    steps: PosInt
    n_prompts: PosInt
    group_size: Annotated[int, Check(minimum=2)]
    temperature: Positive
    max_new: PosInt
    adv_eps: Positive                # added to the group std
    skip_zero_var: bool              # drop groups whose rewards are all equal
    loss_norm: Literal["token", "seq"]
    clip_lo: NonNeg
    clip_hi: NonNeg
    beta: NonNeg                     # KL weight
    betas: Annotated[list[Beta], Check(min_items=2, max_items=2)]   # Adam (β1, β2)
    weight_decay: NonNeg
    momentum: Annotated[float, Check(minimum=0, exclusive_maximum=1)]   # SGD + momentum ablation
    log_every: PosInt


@dataclass
class SparsityConfig:
    rank: bool                       # also the effective ranks of every ΔW


@dataclass
class SFTLrs:
    """SFT contrast learning rate of each optimizer."""
    adamw: Positive
    adam_nomom: Positive
    adam_noadapt: Positive
    sgd: Positive
    sgd_mom: Positive


@dataclass
class SFTConfig:
    """SFT continuation from the widest base (the contrast: SFT updates are not sparse); one run
    per optimizer and per seed of `rl_sgd.seeds` (the workflow merges the seeds in)."""
    steps: PosInt
    batch_size: PosInt
    lrs: SFTLrs


@dataclass
class TrlCheckConfig:
    """One trl GRPOTrainer step replayed through our loss and SGD; the updates are compared."""
    width: Annotated[int, Check(minimum=4)]
    n_layers: PosInt
    n_prompts: PosInt
    group_size: Annotated[int, Check(minimum=2)]
    max_new: PosInt
    lr: Positive
    seed: int
    tol: Positive


@dataclass
class AnalysisConfig:
    ablation_ref_lr: Positive
    match_tol: NonNeg                # accuracy tolerance when matching SGD to AdamW's range (R2a)


@dataclass
class Hub:
    """Paper-scale pointers: the RL framework, models, datasets and lm-eval tasks."""
    framework: str | None
    models: list[str]
    rl_dataset: str | None
    eval_datasets: list[str]
    lm_eval_tasks: list[str]


@dataclass
class Config:
    widths: Annotated[list[PosInt], Check(min_items=2, unique_items=True)]
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
    grid: Grid
    ablation: Ablation
    prompts: PromptsConfig
    warmstart: WarmstartConfig
    grpo: GRPOConfig
    sparsity: SparsityConfig
    sft: SFTConfig
    trl_check: TrlCheckConfig
    analysis: AnalysisConfig
    hub: Hub

    def __post_init__(self):
        if len(self.warmstart.steps) != len(self.widths):
            raise InputError(f"config key 'warmstart.steps' needs one entry per width ({len(self.widths)}: "
                             f"{self.widths}), got {self.warmstart.steps}")
