"""The `lfq` section of a scale file (config/scales/<scale>.yaml), declared once: LFQ
(arXiv 2605.29756), logit-aware final-block quantization on top of OmniQuant's learnable weight
clipping and GPTQ, at several (bits, group size) settings. Every key is required.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, PosInt, Positive
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

SUM_TASK = "lfq_running_sum"  # our exported lm-eval task (running sums); it runs alone


@dataclass
class DataConfig:
    """The generated corpus (running-sum lines and PCFG text; our tiny task)."""
    train_chars: PosInt
    val_chars: PosInt
    calib_chars: PosInt
    sum_fraction: Annotated[float, Check(exclusive_minimum=0, maximum=1)]  # share of running-sum lines
    n_digits: PosInt             # generated digits per prompt = the longest bucket
    n_eval: Annotated[int, Check(minimum=1, maximum=100)]  # evaluation seeds
    seed: int


@dataclass
class BaseConfig:
    """The full-precision base: trained here, or a hub model (paper scale)."""
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    val_batches: PosInt
    hub_id: str | None           # paper scale: the model to quantize, loaded instead of trained
    seed: int

    def __post_init__(self):
        if self.seq_len > self.model.max_seq_len:
            raise InputError(f"config key 'base.seq_len' {self.seq_len} exceeds base.model.max_seq_len "
                             f"{self.model.max_seq_len}")


@dataclass
class CalibConfig:
    """Calibration set (OmniQuant's default: 128 × 2048-token WikiText-2 train segments)."""
    source: str                  # "generated" (calib.txt of the data step) or a hub dataset id
    subset: str | None           # e.g. "wikitext-2-raw-v1"
    split: str
    text_field: str
    n_samples: PosInt
    seq_len: PosInt
    seed: int


@dataclass
class Setting:
    """One weight-quantization setting (the step reads it merged into `quant`)."""
    bits: Literal[2, 3, 4, 8]
    group_size: PosInt


@dataclass
class QuantSection:
    """The `quant` section: LWC (OmniQuant) and GPTQ knobs shared by every setting."""
    epochs: PosInt               # LWC epochs over the calibration set
    batch_size: PosInt
    lr: Positive                 # AdamW, weight decay 0 (OmniQuant's defaults)
    chunk: PosInt                # tokens per vocab-softmax chunk (our choice, bounds memory)
    gptq_block_size: PosInt
    gptq_percdamp: NonNeg
    gptq_act_order: bool
    forward_batch: PosInt        # sequences per no-grad forward (activation propagation)
    seed: int


@dataclass
class EvalConfig:
    seq_len: PosInt
    n_kl_seqs: PosInt
    n_ppl_seqs: PosInt
    buckets: Annotated[list[PosInt], Check(min_items=1)]
    batch_size: PosInt
    ppl_source: str | None       # None: generated PCFG text; else a hub dataset id
    ppl_subset: str | None
    lm_eval_tasks: list[str]
    lm_eval_limit: PosInt | None

    def __post_init__(self):
        if sorted(self.buckets) != self.buckets:
            raise InputError(f"config key 'eval.buckets' must be an increasing list, got {self.buckets}")
        if SUM_TASK in self.lm_eval_tasks and len(self.lm_eval_tasks) > 1:
            raise InputError(f"config key 'eval.lm_eval_tasks': {SUM_TASK!r} runs alone (an exported task)")


@dataclass
class AnalysisConfig:
    mse_variant: str
    headmse_variant: str
    lfq_variant: str


@dataclass
class Config:
    """LFQ (arXiv 2605.29756): base, calibration, settings × variants, evaluation, claims."""
    data: DataConfig
    base: BaseConfig
    calib: CalibConfig
    # quantization seeds, the claims' outer replicates: seed s draws its own calibration windows
    # (calib.seed + s) and orders LWC's minibatches by quant.seed + s; each its own outputs
    seeds: Annotated[list[Annotated[int, Check(minimum=0)]], Check(min_items=1, unique_items=True)]
    settings: Annotated[list[Setting], Check(min_items=1)]
    variants: Annotated[list[Annotated[str, Check(pattern="^(rtn|gptq|omni)(-(headmse|lfq))?$")]],
                        Check(min_items=1, unique_items=True)]
    quant: QuantSection
    eval: EvalConfig
    analysis: AnalysisConfig
