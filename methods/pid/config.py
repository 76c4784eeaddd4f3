"""The `pid` section of a scale file (config/scales/<scale>.yaml), declared once: decision-level
partial information decomposition of multimodal models (arXiv 2606.00959) — generated bimodal
and tri-modal items, fusion models trained under several task-family mixtures, the BATCH PID
estimator of their decisions, PID-guided reweighted fine-tuning, and the claim analysis.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core. The steps use these classes
(`synth.py`, `run.py`, `analysis.py`, `__main__.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check, NonNeg, PosInt, Positive, Prob


@dataclass
class Data:
    """The generated items (methods.pid.synth; the data step also gets the hub section)."""
    n_train: PosInt                  # VL training pool (family-balanced)
    n_profile: PosInt                # items whose embedding statistics calibrate the masking
    n_test: PosInt
    n_av_train: PosInt               # omni (audio-visual) items
    n_av_test: PosInt
    vision_only_frac: Prob           # share of vision-only items in the omni training mix
    seed: int


@dataclass
class TrainConfig:
    """The fusion models, one per task-family mixture, plus the omni (AV) model."""
    d: PosInt
    hidden: PosInt
    jitter: NonNeg
    steps: PosInt
    batch_size: PosInt
    lr: Positive
    mask_prob: Prob                  # modality dropout: masked conditionals stay in-distribution
    # checkpoint name → fraction of the steps
    checkpoints: Annotated[dict[Annotated[str, Check(pattern=r"^[a-z]+$")],
                                Annotated[float, Check(exclusive_minimum=0, maximum=1)]],
                           Check(min_properties=1)]
    # mixture name → family weights (RED, U_TXT, U_VIS, SYN); "omni" names the AV model
    mixes: Annotated[dict[Annotated[str, Check(pattern=r"^[a-z_]+$", not_in=("omni",))],
                          Annotated[list[NonNeg], Check(min_items=4, max_items=4)]],
                     Check(min_properties=1)]
    # training seeds: every mixture (C2's 12 configurations) is trained once per seed, the seed the
    # outer replicate of C2's Spearman ρ; the omni model (C3) and the reweighting base (C4) use the first
    seeds: Annotated[list[int], Check(min_items=1)]


@dataclass
class PIDConfig:
    """The BATCH estimator (learned joint over a batch, Sinkhorn projection onto the marginals)."""
    batch_size: PosInt
    n_batches: PosInt
    epochs: PosInt
    lr: Positive
    sinkhorn_iters: PosInt
    sinkhorn_tol: Positive
    family_configs: list[str]        # configurations that also get a per-family PID (C1's profile)
    seed: int


@dataclass
class ReweightConfig:
    """PID-guided reweighted fine-tuning (GapScore / shortcut items) against uniform and random."""
    base: Annotated[str, Check(pattern=r"^[a-z_]+_[a-z]+$")]   # "<mix>_<checkpoint>" to fine-tune
    n_ft: PosInt                     # fine-tuning items (family-balanced train pool)
    top_k: PosInt
    gap_weight: NonNeg
    shortcut_weight: NonNeg
    tau: Prob                        # shortcut items: SC ≥ tau
    steps: PosInt
    batch_size: PosInt
    lr: Positive
    seeds: Annotated[list[int], Check(min_items=1)]


@dataclass
class AnalysisConfig:
    profile_config: str              # configuration whose per-family PID is C1's profile
    min_configs: PosInt              # fewer VL configurations than this: C2 is not measured


@dataclass
class Benchmark:
    """A hub benchmark (paper scale): the lmms-eval task name selects the prompt format
    (methods/pid/hub.py FORMATS); the items come from the hub dataset through `datasets`."""
    name: Annotated[str, Check(pattern=r"^[a-z0-9_]+$")]
    dataset: str                     # hub dataset id
    subset: str | None               # dataset config (None: the default one)
    split: str


@dataclass
class Hub:
    """Paper scale: hub MLLMs (AutoModelForImageTextToText) and benchmarks; empty below paper
    scale. The audio-visual (omni) part is not run at paper scale (methods/pid/README.md)."""
    vl_models: list[str]
    benchmarks: list[Benchmark]
    lora_base: str | None            # the reweighting's LoRA base model


@dataclass
class Config:
    data: Data
    train: TrainConfig
    pid: PIDConfig
    reweight: ReweightConfig
    analysis: AnalysisConfig
    hub: Hub
