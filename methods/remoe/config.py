"""The `remoe` section of a scale file (config/scales/<scale>.yaml), declared once: ReMoE
(arXiv 2605.27081), gate-only router fine-tuning that raises token-wise expert reuse (the
expert overlap ratio between consecutive tokens) so an expert cache hits more often under a
memory budget. Every key is required; the steps read their sub-sections as these classes.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig


@dataclass
class DataConfig:
    """The domain-switching corpus (our tiny task): segments of 4 generators in turn."""
    n_train: PosInt
    n_eval: PosInt
    doc_len: Annotated[int, Check(minimum=2)]  # tokens a model sees per document (file rows hold doc_len + 1)
    mean_segment: Annotated[float, Check(minimum=1)]  # geometric segment length's mean
    max_operand: PosInt
    seed: int

    def __post_init__(self):
        if self.mean_segment < 1:
            raise InputError(f"config key 'data.mean_segment': must be >= 1, got {self.mean_segment}")


@dataclass
class MoEConfig:
    """The tiny MoE-Llama's FFN: softmax → top-K → renormalised gates, plus shared experts."""
    n_experts: Annotated[int, Check(minimum=2)]
    k: PosInt
    expert_d_ff: PosInt
    n_shared: NonNegInt
    aux_coef: NonNeg             # Switch load-balancing loss (pre-training only)
    dispatch: Literal["sorted", "rounds", "dense"]   # methods.core.moe dispatch


@dataclass
class PretrainConfig:
    model: ModelConfig
    moe: MoEConfig
    train: TrainConfig
    hub_id: str | None           # paper scale: a released MoE, loaded instead of pre-trained
    seed: int


@dataclass
class FinetuneSection:
    """The `finetune` section: gate-only fine-tuning (arXiv 2605.27081: reuse, smoothness, lag
    and window terms; the step adds the variant's switches and the seed)."""
    train: TrainConfig
    lambda_reuse: NonNeg
    lambda_smooth: NonNeg
    lambda_lag: NonNeg
    lambda_ws: NonNeg
    window: PosInt
    lags: Annotated[list[PosInt], Check(min_items=1)]
    warm_frac: Prob              # α_t = min(1, t / (warm_frac · steps))
    sym_half: bool


@dataclass
class Variant:
    """One fine-tuned variant: the trust-region (KL) weight and whether the locality terms are on."""
    name: Annotated[str, Check(pattern="^[a-z][a-z0-9_]*$")]
    lambda_kl: NonNeg
    locality: bool


@dataclass
class TraceConfig:
    n_docs: PosInt
    batch_size: PosInt


@dataclass
class AnalysisConfig:
    base: str
    remoe: str
    ce_only: str
    no_trust: str
    capacities: Annotated[list[PosInt], Check(min_items=1)]
    policies: Annotated[list[Literal["lru", "fifo", "belady"]], Check(min_items=1)]
    backend: Literal["native", "cachetools"]
    n_sim_docs: PosInt           # documents simulated per layer (≤ traced documents)


@dataclass
class HubConfig:
    """Paper scale (`pretrain.hub_id` names the released MoE whose gates are fine-tuned): the
    second MoE whose EOR is measured (`eor_model_id`), the fine-tuning data (`train_dataset`:
    the first `n_train` rows train, the next `n_eval` rows are held out), the token budget per
    conversation (`seq_len`), micro-batches per update (`grad_accum`: `finetune.train.batch_size`
    sequences per update in `grad_accum` micro-batches) and the lm-eval tasks of the quality
    check. Serving (vLLM CPU offload, llama.cpp GGUF) is not run here (README)."""
    eor_model_id: str | None
    train_dataset: str | None
    n_train: NonNegInt
    n_eval: NonNegInt
    seq_len: NonNegInt
    grad_accum: NonNegInt
    lm_eval_tasks: list[str]


@dataclass
class Config:
    """ReMoE (arXiv 2605.27081): pre-train a tiny MoE, fine-tune its gates per variant and seed,
    trace the routing and simulate expert caches."""
    data: DataConfig
    pretrain: PretrainConfig
    finetune: FinetuneSection
    variants: Annotated[list[Variant], Check(min_items=1)]
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]  # fine-tunes per variant (one base)
    trace: TraceConfig
    analysis: AnalysisConfig
    hub: HubConfig
