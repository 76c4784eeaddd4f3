"""The `efficient_dlm` section of a scale file (config/scales/<scale>.yaml), declared once:
Efficient-DLM (arXiv 2512.14067) — an autoregressive LM converted into a block-diffusion LM under
several attention patterns (Table 1 of the paper, our selection), evaluated with
confidence-threshold parallel decoding.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

# the conversion variants: attention patterns of Table 1 of arXiv 2512.14067, our selection
# (methods/efficient_dlm/run.py VARIANTS)
Variant = Literal["fullbidir", "blk_noisy", "blk_clean", "blk_clean_posmask"]


@dataclass
class DataConfig:
    """The generated corpus and held-out prompts (methods.efficient_dlm.run.build_data)."""
    corpus: str | None               # paper scale: a hub corpus
    n_train_docs: PosInt
    n_eval: PosInt                   # per task
    # generated tasks (each a doc type and a held-out eval task); `mix` = doc weights of the tasks + pcfg
    tasks: Annotated[list[Literal["add", "rev", "copy"]], Check(min_items=1, unique_items=True)]
    mix: Annotated[list[NonNeg], Check(min_items=2, max_items=4)]
    max_digits: PosInt
    fixed_format: bool               # zero-pad addition operands to max_digits and the sum to max_digits+1
    rev_min: PosInt
    rev_max: PosInt
    rev_chars: Annotated[str, Check(min_length=1)]   # alphabet of the reversed / copied strings
    seed: int

    def __post_init__(self):
        k = len(self.tasks)
        if len(self.mix) != k + 1 or sum(self.mix[:k]) <= 0:
            raise InputError(f"config key 'data.mix': {k + 1} non-negative weights ({', '.join(self.tasks)}, pcfg), "
                             f"the tasks' not all 0, got {self.mix}")
        if self.rev_min > self.rev_max:
            raise InputError(f"config key 'data.rev_min' ({self.rev_min}) must be ≤ 'data.rev_max' ({self.rev_max})")


@dataclass
class ArConfig:
    """The autoregressive base (methods.efficient_dlm.run.train_ar): the tiny Llama trained on the
    corpus, or at paper scale the pretrained hub model."""
    hub_id: str | None               # paper scale: the pretrained AR base
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    seed: int


@dataclass
class ConvertSection:
    """The `convert` section: continuous pretraining of the AR base as a block-diffusion LM
    (methods.efficient_dlm.run.convert); the workflow adds the seed (one of `seeds`)."""
    train: TrainConfig
    block: PosInt
    seq_len: PosInt
    # masking β; null = ln 10 / block (λ = exp(−β·B') = 0.1; Eq. 2 of arXiv 2512.14067 as read
    # from third-party notes, not verified)
    beta: NonNeg | None
    eps: Annotated[float, Check(exclusive_minimum=0, exclusive_maximum=1)]
    clean_intra: Literal["causal", "bidir"]

    def __post_init__(self):
        if self.seq_len % self.block:
            raise InputError(f"config key 'convert.seq_len' ({self.seq_len}) must be a multiple of "
                             f"'convert.block' ({self.block})")


@dataclass
class ConvertConfig(ConvertSection):
    """One conversion: the `convert` section plus its seed (noise draws and batch order; the AR
    base is the same for every seed)."""
    seed: int


@dataclass
class EvalConfig:
    """Confidence-threshold parallel decoding of every model (methods.efficient_dlm.run.evaluate)."""
    block: PosInt
    thresholds: Annotated[list[Prob], Check(min_items=1)]   # confidence thresholds of parallel decoding
    max_new: PosInt
    n_per_task: PosInt
    batch_size: PosInt
    # paper scale (lm-eval tasks, methods/efficient_dlm/lm.py): Monte-Carlo draws of the
    # block-diffusion ELBO per loglikelihood request, and lm-eval's per-task `limit` (null: all)
    mc_samples: PosInt = 8
    lm_eval_limit: PosInt | None = None


@dataclass
class AnalysisConfig:
    claim_threshold: float           # claim 2
    fast_threshold: float            # claim 3
    mid_threshold: float             # claim 4
    slow_threshold: float            # claim 4 reference


@dataclass
class Hub:
    """Paper-scale pointers; empty at smoke/tiny. `ar_bases`: the AR models the paper converts
    (`ar.hub_id` must be one of them); `baselines`: AR hub models scored side by side with the
    converted model (methods.efficient_dlm.run.evaluate_lm_eval; loaded without remote code);
    `train_tokens`: the conversion budget, which sets the corpus shards' size and the conversion
    steps (workflow/rules/helpers/efficient_dlm.smk); `lm_eval_tasks`: the evaluation tasks.
    The released nvidia/Efficient-DLM checkpoints are not evaluated: they load only with
    trust_remote_code, which this harness never uses."""
    ar_bases: list[str]
    baselines: list[str]
    train_tokens: PosInt | None
    lm_eval_tasks: list[str]


@dataclass
class Config:
    variants: Annotated[list[Variant], Check(min_items=1)]
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]   # conversions per variant (one AR base)
    data: DataConfig
    ar: ArConfig
    convert: ConvertSection
    eval: EvalConfig
    analysis: AnalysisConfig
    hub: Hub

    def __post_init__(self):
        if self.ar.hub_id is not None and self.hub.ar_bases and self.ar.hub_id not in self.hub.ar_bases:
            raise InputError(f"config key 'ar.hub_id' ({self.ar.hub_id!r}) is not one of 'hub.ar_bases' "
                             f"({', '.join(self.hub.ar_bases)})")
