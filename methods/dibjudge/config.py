"""The `dibjudge` section of a scale file (config/scales/<scale>.yaml), declared once: DIBJudge
(arXiv 2603.10351) — a pairwise judge with a compressed robust channel (Gaussian VIB or EMA vector
quantiser), a bias channel trained on translationese proxy tasks, and a cross-correlation penalty
between the two, studied on synthetic languages.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob

# a fact value's range: a wrong value must exist outside the 2 context facts
AtLeast3 = Annotated[int, Check(minimum=3)]


@dataclass
class NTrain:
    """Training pairs per language."""
    EN: PosInt
    L1: PosInt
    L2: PosInt


@dataclass
class NSynonyms:
    """Surface forms per word in each low-resource language (EN has one)."""
    L1: PosInt
    L2: PosInt


@dataclass
class DataConfig:
    """The synthetic languages and the preference pairs (methods.dibjudge.synth_lang)."""
    n_people: PosInt
    n_objects: PosInt
    n_colours: AtLeast3
    max_count: AtLeast3              # counts 1..max_count
    n_train: NTrain
    n_synonyms: NSynonyms
    mt_better_frac: Prob             # train: P(the better response is MT) in L1/L2
    particle_prob: Prob
    n_test: PosInt                   # pairs per language and test set
    len_bins: PosInt
    nll_bins: PosInt
    ttr_bins: PosInt
    omit_frac: Prob                  # P(the worse response omits the value, else a wrong value)
    swap_frac: Prob                  # P(a wrong value is the distractor fact's value, else hallucinated)
    ref_lm_sentences: PosInt         # EN-order corpus for the reference bigram LM (NLL proxy)
    seed: int


@dataclass
class ModelConfig:
    """The judge's encoder and its two channels (methods.dibjudge.model)."""
    d_model: PosInt
    n_layers: PosInt
    n_heads: PosInt
    d_ff: PosInt
    d_z: PosInt                      # robust and bias channel width (equal: L_dis uses their cosine)
    max_len: PosInt
    vq_codes: PosInt                 # EMA VQ with K codes (the abstract; official `vq.py`)
    vq_decay: Prob
    vq_beta: NonNeg                  # commitment weight (official `vq.py`: 0.25)


@dataclass
class Hub:
    """Paper-scale pointers; null/empty at smoke/tiny. With `judge` set the data step reads the
    hub datasets (methods.dibjudge.hub_data) and the train step fine-tunes the hub judge
    (methods.dibjudge.hub); the synthetic `data` keys other than n_test, the proxy bins and seed
    are then unused."""
    judge: str | None                # judge LM (LoRA), also the translator of the Bias Suite and the NLL proxy LM
    encoder: str | None              # the shared response encoder E of the two channels
    train_data: str | None           # preference pairs (M-Preference-Collection layout)
    eval_data: list[str]             # pairwise benchmarks (prompt / chosen / rejected / language)
    train_pairs: NonNegInt = 0           # criteria-free training pairs sampled (official preprocessing: 50k)
    low_resource: list[str] = field(default_factory=list)   # ISO 639-1 codes of the low-resource group L2


@dataclass
class RunConfig:
    """Training of every variant (methods.dibjudge.run)."""
    model: ModelConfig
    steps: PosInt
    batch_size: PosInt
    lr: NonNeg                       # encoder, robust branch, compression, score head
    lr_heads: NonNeg                 # bias branch, proxy and reconstruction heads (official 4B config: 2e-4)
    weight_decay: NonNeg
    grad_clip: NonNeg
    warmup_frac: Prob                # lr warm-up then cosine; λ schedules ramp over the same span
    kl_weight: NonNeg                # official 4B config: λ_comp · 1e-4 · KL
    vq_weight: NonNeg                # weight of the VQ commitment loss (the official config gives none for the VQ swap)
    lam_comp: NonNeg
    lam_bias: NonNeg
    lam_dis: NonNeg
    dis_c: NonNeg                    # c in mean|cos| + c·mean(C²)
    queue: PosInt                    # FIFO rows for C
    ema_decay: Prob                  # inverse-magnitude weighting of the proxy losses
    eval_batch: PosInt
    probe_n: PosInt                  # responses for dCor / probe
    seeds: Annotated[list[int], Check(min_items=1)]
    hub: Hub


# the judge variants: plain SFT, DIBJudge with a VIB or a VQ bottleneck, and the ablations
Variant = Literal["sft", "dib_vib", "dib_vq", "no_dis", "no_proxy", "no_bottleneck"]


@dataclass
class ReportConfig:
    lang: Literal["L1", "L2"]        # the low-resource language of C1/C2
    full: Literal["dib_vib", "dib_vq"]   # the DIBJudge variant of C1-C4


@dataclass
class Config:
    data: DataConfig
    train: RunConfig
    variants: Annotated[list[Variant], Check(min_items=1)]
    report: ReportConfig
