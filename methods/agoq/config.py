"""The `agoq` section of a scale file (config/scales/<scale>.yaml), declared once: AGoQ
(arXiv 2605.00539, abstract), layer-aware quantization of the activations saved for backward
(LAAQ: bits per layer type and pipeline stage) and an 8-bit gradient all-reduce (QuanGrad) in
data-parallel training. Every key is required; the steps read their sub-sections as these classes.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

# LAAQ scopes of a Llama block (methods/agoq/laaq.py documents each) and the bit-widths a scope
# may keep its saved activations in; 16 = kept as they are.
Tag = Literal["norm", "attn_in", "attn_core", "o_in", "mlp_in", "mlp_inner", "down_in", "head", "other"]
TAGS: tuple[str, ...] = typing.get_args(Tag)
Bits = Literal[2, 4, 8, 16]
Stages = Annotated[list[Annotated[int, Check(minimum=2)]], Check(min_items=1)]


@dataclass
class DataConfig:
    """The corpus: PCFG sentences and arithmetic lines, char-level (tiny scale, our choice), or a
    hub corpus and tokenizer (paper scale)."""
    source: str
    text_field: str
    tokenizer: str
    train_chars: PosInt
    val_chars: PosInt
    arith_fraction: Prob         # probability that a line is arithmetic
    max_operand: PosInt
    seed: int


@dataclass
class RunSection:
    """The `run` section: one data-parallel training run per variant and seed (the step adds
    both)."""
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    world_size: Annotated[int, Check(minimum=2)]  # ranks of the job's process group: nccl on CUDA, gloo on CPU
    hub_id: str | None           # paper scale: the model's shape from a hub config (fresh init)
    eval_batches: PosInt
    n_stages: PosInt             # virtual pipeline stages (tiny: layers 0–1 | 2–3)
    group_size: PosInt           # LAAQ group G
    grad_block: PosInt           # QuanGrad block
    stochastic: bool
    grad_error_every: NonNegInt  # log the all-reduce error against the exact fp32 mean
    loss_window: PosInt          # final train loss = mean of the last `loss_window` steps

    def __post_init__(self):
        if self.world_size < 1 or self.train.batch_size % self.world_size:
            raise InputError(f"config key 'run.train.batch_size' ({self.train.batch_size}) must be a multiple "
                             f"of 'run.world_size' ({self.world_size})")
        if not 1 <= self.loss_window <= self.train.steps:
            raise InputError(f"config key 'run.loss_window' must be in [1, run.train.steps], got {self.loss_window}")


@dataclass
class StageOverride:
    """The bits of one tag in one pipeline stage (the stage policy is our inferred design)."""
    stage: NonNegInt
    tag: Tag
    bits: Bits


@dataclass
class BitsPerTag:
    """LAAQ bits of every tag (16 = keep)."""
    norm: Bits
    attn_in: Bits
    attn_core: Bits
    o_in: Bits
    mlp_in: Bits
    mlp_inner: Bits
    down_in: Bits
    head: Bits
    other: Bits


assert tuple(f.name for f in dataclasses.fields(BitsPerTag)) == TAGS


@dataclass
class Variant:
    """A training variant: LAAQ bits per tag, per-stage overrides, and the all-reduce."""
    name: Annotated[str, Check(pattern="^[a-z0-9_]+$")]
    bits: BitsPerTag
    stage_overrides: list[StageOverride]
    allreduce: Literal["fp32", "quangrad"]

    def policy(self) -> tuple[dict, list[dict]]:
        """(bits per tag, [{stage, tag, bits}]): the arguments of laaq.BitPolicy."""
        return (dataclasses.asdict(self.bits),
                [{"stage": o.stage, "tag": o.tag, "bits": o.bits} for o in self.stage_overrides])


@dataclass
class ProbeConfig:
    """Gradient collectives over simulated workers and every variant's saved-activation bytes."""
    workers: Stages              # worker counts W ≥ 2
    micro_batch: PosInt
    n_batches: PosInt
    seq_len: PosInt
    group_size: PosInt
    grad_block: PosInt
    n_stages: PosInt
    seed: int


@dataclass
class AnalysisConfig:
    """Variant names of the claims and the pipeline-parallel memory model."""
    baseline: str
    laaq: str
    uni4: str
    uni2: str
    laaq_stage: str
    agoq: str
    pp_stages: Stages
    claim_stages: Annotated[int, Check(minimum=2)]
    scale_overhead_bits: NonNeg  # bf16 scale + zero per group of 128

    def __post_init__(self):
        if self.claim_stages not in self.pp_stages:
            raise InputError(f"config key 'analysis.claim_stages' ({self.claim_stages}) must be in pp_stages")


@dataclass
class Config:
    """AGoQ (arXiv 2605.00539): data, the run recipe, the variants (those in `train_variants` are
    trained, once per seed of `seeds`), the probes and the analysis."""
    data: DataConfig
    run: RunSection
    variants: Annotated[list[Variant], Check(min_items=1)]
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]  # every trained variant, each seed
    train_variants: Annotated[list[str], Check(min_items=1, unique_items=True)]
    probe: ProbeConfig
    analysis: AnalysisConfig
