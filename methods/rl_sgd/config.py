"""The `rl_sgd` section of a scale file (config/scales/<scale>.yaml), declared once: SGD vs AdamW
in reinforcement learning with verifiable rewards (arXiv 2602.07729) — a base LM per width (tiny:
warm-started on addition) or per hub model (paper: `hub.models`), GRPO under each optimizer and
learning rate, the sparsity of the updates (after arXiv 2505.11711), an SFT contrast and a trl
cross-check.

Two paths, one per kind of base: the tiny path (`widths`, `prompts`, `warmstart`; `hub.models`
empty) and the hub path (`hub.models`, `hub.rl_dataset`, `data`, `eval`; no `widths`, `prompts`
or `warmstart`, which describe the tiny addition task and its warm-started LMs).

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
    # hub path: sequences per forward/backward pass (gradient accumulation over the batch, the
    # loss weighted so the update equals the whole-batch one); null = the whole batch at once
    micro_batch: PosInt | None = None


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
    """Paper-scale pointers: the base models (GRPO runs from each; the first and the last are the
    narrowest and widest of the width comparison, the last is the main model of every seed, the
    ablations and the SFT contrast), the RL dataset (fields `problem`, `answer`, `solution`), the
    held-out datasets (`problem` and `answer`, or a `solution` with a \\boxed answer; the accuracy
    of the claims) and the lm-eval tasks every base and run is also scored on (reported). Empty on
    the tiny path."""
    models: list[str]
    rl_dataset: str | None
    eval_datasets: list[str]
    lm_eval_tasks: list[str]


@dataclass
class DataConfig:
    """Hub path: problems drawn from `hub.rl_dataset` (RL prompts and the SFT contrast's worked
    solutions) and from each `hub.eval_datasets` entry (held-out accuracy); null = all rows."""
    n_train: PosInt | None
    n_eval: PosInt | None
    seed: int


@dataclass
class EvalConfig:
    """Hub path: greedy decoding of the held-out problems (at most `max_new` tokens, `batch_size`
    prompts at a time) and the lm-eval tasks (`lm_eval_limit` items per task; null = all)."""
    max_new: PosInt
    batch_size: PosInt
    lm_eval_batch_size: PosInt
    lm_eval_limit: PosInt | None


@dataclass
class Config:
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
    grid: Grid
    ablation: Ablation
    grpo: GRPOConfig
    sparsity: SparsityConfig
    sft: SFTConfig
    trl_check: TrlCheckConfig
    analysis: AnalysisConfig
    hub: Hub
    # the tiny path (addition task, warm-started tiny LMs)
    widths: Annotated[list[PosInt], Check(min_items=2, unique_items=True)] | None = None
    prompts: PromptsConfig | None = None
    warmstart: WarmstartConfig | None = None
    # the hub path
    data: DataConfig | None = None
    eval: EvalConfig | None = None

    def __post_init__(self):
        tiny = {k: getattr(self, k) is not None for k in ("widths", "prompts", "warmstart")}
        hub = {k: getattr(self, k) is not None for k in ("data", "eval")}
        if self.hub.models:
            if any(tiny.values()):
                raise InputError(f"config keys {[k for k, v in tiny.items() if v]} describe the tiny path; with "
                                 "'hub.models' set the bases are the hub models (remove them)")
            missing = [k for k, v in hub.items() if not v] + ([] if self.hub.rl_dataset else ["hub.rl_dataset"])
            if not self.hub.eval_datasets:
                missing.append("hub.eval_datasets")
            if missing:
                raise InputError(f"config key(s) {missing} needed with 'hub.models' set")
            return
        if not all(tiny.values()):
            raise InputError(f"config key(s) {[k for k, v in tiny.items() if not v]} needed when 'hub.models' "
                             "is empty (the tiny path)")
        if any(hub.values()):
            raise InputError(f"config keys {[k for k, v in hub.items() if v]} belong to the hub path "
                             "('hub.models' is empty)")
        if len(self.warmstart.steps) != len(self.widths):
            raise InputError(f"config key 'warmstart.steps' needs one entry per width ({len(self.widths)}: "
                             f"{self.widths}), got {self.warmstart.steps}")
