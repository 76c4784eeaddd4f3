"""The `wd_plasticity` section of a scale file (config/scales/<scale>.yaml), declared once: the
pretraining weight-decay sweep of "Weight Decay Improves Language Model Plasticity"
(arXiv 2602.11137), pretrain → fine-tune → evaluate with the AdamW λ of pretraining as the only
independent variable. Every key is required; the steps read their sub-sections as these classes.

Torch-free: the workflow loads this file by path at parse time (methods.core.config.section_class).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive, Prob
from methods.core.models import ModelConfig
from methods.core.train import TrainConfig

Seeds = Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]
OpenFraction = Annotated[float, Check(exclusive_minimum=0, exclusive_maximum=1)]
TaskName = Annotated[str, Check(pattern="^[A-Za-z][A-Za-z0-9]*$")]


@dataclass
class TaskSource:
    """One downstream SFT task: generated from the world (T1 QA, T2 sum format, T3 sorting; our
    design, standing in for the paper's six SFT sets) or read from a hub dataset."""
    source: str                  # "world" (generated) or a hub id / saved dataset dir
    prompt_field: str
    answer_field: str
    n_train: PosInt              # generated tasks: examples per split (T2, T3); hub: cap on train
    n_dev: PosInt
    n_test: PosInt


@dataclass
class WorldConfig:
    """The pretraining corpus (a synthetic world of people, arithmetic and PCFG filler at tiny
    scale; a hub corpus at paper scale) and the downstream tasks."""
    source: str                  # pretraining corpus: "world" or a hub id / local dataset
    text_field: str
    n_people: PosInt
    n_cities: PosInt
    n_colours: PosInt
    corpus_chars: PosInt
    val_chars: PosInt
    mix_bio: Prob                # shares of the corpus by document (biographies, arithmetic, rest PCFG)
    mix_arith: Prob
    qa_train_people: OpenFraction  # T1: people whose QA trains; dev takes the next share, test the rest
    qa_dev_people: OpenFraction
    seed: int
    tasks: Annotated[dict[TaskName, TaskSource], Check(min_properties=1)]


@dataclass
class TokenizerConfig:
    kind: Literal["char", "bpe"]
    vocab_size: NonNegInt        # bpe only; 0 for char


@dataclass
class PretrainConfig:
    """One base model per (λ, seed); λ (train.weight_decay) and the seed are set per run."""
    model: ModelConfig
    train: TrainConfig
    seq_len: PosInt
    eval_batches: PosInt


@dataclass
class FinetuneConfig:
    """The same SFT recipe for every base (λ_ft = 0); the LR grid's dev-best run is kept."""
    train: TrainConfig
    lrs: Annotated[list[Positive], Check(min_items=1, unique_items=True)]
    eval_batch_size: PosInt


@dataclass
class ProbeConfig:
    cv_folds: Annotated[int, Check(minimum=2)]
    n_val_sequences: PosInt
    loss_batches: PosInt
    batch_size: PosInt
    probe_attribute: Literal["city", "colour", "year"]
    probe_c: Positive            # inverse L2 strength of the logistic probe (sklearn's C)
    # what the probe reads (methods.wd_plasticity.probes): "name" = the name alone, the fact
    # stored in the weights; "recall" = the position where the model recalls the fact stated
    # earlier in its context (the tiny models store no fact in their weights, see README)
    probe_features: Literal["name", "recall"]


@dataclass
class EvalConfig:
    batch_size: PosInt
    limit: PosInt | None         # lm-eval's per-task document limit (smoke only)
    max_gen_toks: PosInt


@dataclass
class AnalysisConfig:
    baseline_wd: NonNeg          # the common default λ = 0.1 the paper compares against
    monotone_wds: Annotated[list[NonNeg], Check(min_items=2)]
    bootstrap: PosInt            # no longer read: the claim intervals come from per-seed replicates (core)
    seed: int


@dataclass
class Config:
    """Weight-decay plasticity sweep (arXiv 2602.11137): λ × seed bases, each fine-tuned on
    every task and probed."""
    weight_decays: Annotated[list[NonNeg], Check(min_items=2, unique_items=True)]
    seeds: Seeds
    world: WorldConfig
    tokenizer: TokenizerConfig
    pretrain: PretrainConfig
    finetune: FinetuneConfig
    probes: ProbeConfig
    eval: EvalConfig
    analysis: AnalysisConfig
