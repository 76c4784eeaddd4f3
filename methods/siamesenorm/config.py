"""The `siamesenorm` section of a scale file (config/scales/<scale>.yaml), declared once:
SiameseNorm (arXiv 2602.08064), two coupled residual streams, one Pre-Norm and one Post-Norm,
against Pre-, Post- and hybrid normalisation across a learning-rate sweep. Every key is required.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

Scheme = Literal["pre", "post", "post_pre", "hybrid_pre"]
GENERATED_TASK = "siamesenorm_arith"  # our exported lm-eval task over the held-out arithmetic problems


@dataclass
class DataConfig:
    """Generated text (PCFG and arithmetic lines, char-level; our tiny corpus) or a hub corpus."""
    source: str                  # "generated" or a hub id / local corpus
    text_field: str
    tokenizer: str               # "char" or a hub tokenizer id
    train_chars: PosInt
    val_chars: PosInt
    arith_fraction: Prob         # share of characters in arithmetic lines
    max_operand: PosInt          # a, b < max_operand
    max_digit: PosInt            # d < max_digit for products
    n_arith_eval: PosInt         # held-out exact-match prompts
    seed: int

    def __post_init__(self):
        space = 2 * self.max_operand ** 2 + self.max_operand * self.max_digit
        if self.n_arith_eval * 2 > space:
            raise InputError(f"config key 'data.n_arith_eval': {self.n_arith_eval} held-out problems leave "
                             f"too few of the {space} possible ones for training")


@dataclass
class RunConfig:
    """One training run per (scheme, lr, seed); the lr of `train` is replaced by the sweep's."""
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    eval_batches: PosInt         # validation windows: eval_batches × batch_size × seq_len tokens
    grad_stats_step: PosInt      # per-layer gradient norms at this update
    diverge_ratio: Positive      # diverged = NaN, or final loss > ratio × initial loss
    hybrid_attn_norm: bool       # the attn_norm flag of the hybrid_pre variant

    def __post_init__(self):
        if not 1 <= self.grad_stats_step <= self.train.steps:
            raise InputError(f"config key 'run.grad_stats_step' must be in [1, run.train.steps={self.train.steps}], "
                             f"got {self.grad_stats_step}")


@dataclass
class StepTimeSection:
    """The `steptime` section (the step adds the sweep's model, schemes and batch shape)."""
    vocab_size: PosInt
    warmup: NonNegInt
    rounds: PosInt
    seed: int


@dataclass
class EvalConfig:
    tasks: Annotated[list[str], Check(min_items=1)]
    arith_task: str              # the task (or group) whose score is C3's
    arith_metric: str            # paper scale: lm-eval `arithmetic` reports "acc"
    batch_size: PosInt
    limit: PosInt | None         # lm-eval's per-task document limit (smoke only)
    max_gen_toks: PosInt

    def __post_init__(self):
        if GENERATED_TASK in self.tasks and len(self.tasks) > 1:
            raise InputError(f"config key 'eval.tasks': {GENERATED_TASK!r} runs alone (our exported task "
                             f"cannot be mixed with lm-eval's registered ones)")
        if self.arith_task not in self.tasks:
            raise InputError(f"config key 'eval.arith_task': {self.arith_task!r} is not in tasks {self.tasks}")


@dataclass
class AnalysisConfig:
    siamese: str
    baseline: str
    post: str
    low_lr: Positive             # the LR where every scheme trains (C1 reference, C5)
    high_lr: Positive            # the LR that breaks Post-Norm (C1)
    c1_tolerance: NonNeg         # C1: siamese at high_lr within this fraction of its low_lr loss
    c1_post_margin: NonNeg       # C1: post this much worse than pre at high_lr counts as failing


@dataclass
class Config:
    """SiameseNorm (arXiv 2602.08064): schemes × lrs × seeds, step time, evaluation, claims."""
    schemes: Annotated[list[Scheme], Check(min_items=1, unique_items=True)]
    lrs: Annotated[list[Positive], Check(min_items=1, unique_items=True)]
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
    data: DataConfig
    run: RunConfig
    steptime: StepTimeSection
    eval: EvalConfig
    analysis: AnalysisConfig
