"""The `dag_moe` section of a scale file (config/scales/<scale>.yaml), declared once: DAG-MoE
(arXiv 2606.01062), mixture-of-experts layers whose selected experts' outputs are aggregated
through a learned DAG instead of a weighted sum, against sum-MoE baselines on a tiny C1/C2/C3
mixture (our design). Every key is required; the steps read their sub-sections as these classes.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

Seeds = Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
ArchName = Annotated[str, Check(pattern="^[A-Za-z][A-Za-z0-9_]*$")]


@dataclass
class ArchConfig:
    """One architecture of the study: MoE shape and aggregation (weighted sum or the DAG)."""
    n_experts: PosInt
    k: PosInt
    d_ff: PosInt
    aggregation: Literal["sum", "dag"]


@dataclass
class DataConfig:
    """The generated C1/C2/C3 mixture (tiny scale) or a hub corpus (paper scale)."""
    source: str                  # "generated" (the tiny C1/C2/C3 mixture) or a hub corpus id
    text_field: str              # hub corpora only
    tokenizer: str               # "word" (the closed vocabulary) or a hub tokenizer id
    corpus_chars: NonNegInt      # hub corpora only: characters read for training
    modulus: Annotated[int, Check(minimum=2)]
    n_functions: PosInt
    heldout_frac: Annotated[float, Check(minimum=0, exclusive_maximum=1)]
    mix_c1: Prob                 # token fractions of the mixture (C3 ≈ 25%); they sum to 1
    mix_c2: Prob
    mix_c3: Prob
    seq_len: PosInt
    n_val_rows: PosInt
    seed: int

    def __post_init__(self):
        if abs(self.mix_c1 + self.mix_c2 + self.mix_c3 - 1) > 1e-9:
            raise InputError("config keys 'data.mix_c1' + 'data.mix_c2' + 'data.mix_c3' must sum to 1, got "
                             f"{self.mix_c1} + {self.mix_c2} + {self.mix_c3}")
        if not 0 <= self.heldout_frac < 1:
            raise InputError(f"config key 'data.heldout_frac' must be in [0, 1), got {self.heldout_frac}")


@dataclass
class MoEConfig:
    """Knobs shared by every architecture (inferred design, see aggregate.py)."""
    edge_bias_init: float        # b_a; pilot 0 (a ≈ 0.5); a ≈ 0.05-0.1 is the alternative
    edge_weight_init_std: NonNeg
    edge_mode: Literal["soft", "hard_st"]
    dispatch: Literal["sorted", "rounds", "dense"]   # methods.core.moe
    router_renormalize: bool     # Mixtral gates
    aux_loss_coef: NonNeg        # α ≈ 1e-2, the usual Switch/GShard value (our choice)


@dataclass
class LMSection:
    """The `lm` section: the mixture-LM runs of D1/D3/D4 (the step adds the `moe` knobs)."""
    model: ModelConfig
    train: TrainConfig
    eval_batch_size: PosInt


@dataclass
class ComposeSection:
    """The `compose` section: D2's 1-layer composition runs (loss on the answer only)."""
    n_experts: PosInt
    k: PosInt
    d_ff: PosInt
    seeds: Seeds
    model: ModelConfig
    train: TrainConfig


@dataclass
class TimingConfig:
    """The `timing` section: interleaved step-time measurement in one process."""
    batch_size: PosInt
    warmup: NonNegInt
    reps: PosInt


@dataclass
class DownstreamSection:
    """The `downstream` section (paper scale; our choice, the paper's tasks are not verified):
    zero-shot lm-eval tasks of every LM. The MetaMathQA → gsm8k fine-tuning (`sft_dataset`) is
    named but not run."""
    sft_dataset: str | None
    eval_tasks: list[str]


@dataclass
class Config:
    """DAG-MoE vs sum-MoE (arXiv 2606.01062): every arch × seed trained on the mixture, D2's
    composition runs, step time and (paper scale) lm-eval tasks."""
    seeds: Seeds
    archs: Annotated[dict[ArchName, ArchConfig], Check(min_properties=1)]
    data: DataConfig
    moe: MoEConfig
    lm: LMSection
    compose: ComposeSection
    timing: TimingConfig
    downstream: DownstreamSection
