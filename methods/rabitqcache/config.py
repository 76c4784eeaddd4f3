"""The `rabitqcache` section of a scale file (config/scales/<scale>.yaml), declared once:
RaBitQCache (arXiv 2606.31519) — RaBitQ 1-bit key codes with an INT4 query as an unbiased proxy of
the attention logits, adaptive Top-p token selection and sparse attention over the selected
full-precision KV, studied on a passkey / multi-key retrieval task.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

# a probability mass or a kept fraction: (0, 1]
Frac = Annotated[float, Check(exclusive_minimum=0, maximum=1)]

# sizes of the generator's word lists (methods.rabitqcache.data; a test checks they agree): the
# needle names (NATO code words) and the filler words (three of 16 syllables)
N_NAMES = 26
MAX_VOCAB_WORDS = 16 ** 3


@dataclass
class DataConfig:
    """Passkey / multi-key retrieval records (methods.rabitqcache.data): Zipf filler words with
    needles "key <name> is d d d d d ." at random depths, then the query."""
    n_train: PosInt
    n_eval: PosInt
    train_len: PosInt                # tokens per training text
    eval_len: PosInt                 # tokens per evaluation prompt
    vocab_words: PosInt              # filler vocabulary (Zipf)
    zipf_a: NonNeg
    topic_words: NonNegInt           # > 0: each text's filler uses its own random subset of this many words
    min_needles: PosInt              # evaluation prompts
    max_needles: PosInt
    train_min_needles: PosInt        # training texts carry more needles, each one asked
    train_max_needles: PosInt
    n_digits: PosInt
    seed: int

    def __post_init__(self):
        for lo, hi in (("min_needles", "max_needles"), ("train_min_needles", "train_max_needles")):
            if not 1 <= getattr(self, lo) <= getattr(self, hi) <= N_NAMES:
                raise InputError(f"config keys 'data.{lo}'/'data.{hi}' must satisfy 1 ≤ min ≤ max ≤ {N_NAMES}, "
                                 f"got {getattr(self, lo)}, {getattr(self, hi)}")
        # room for each needle ("key <name> is d…d .": n_digits + 4 words) and its question and answer, plus slack
        need = max(self.max_needles, self.train_max_needles) * (self.n_digits + 4) * 2 + 8
        if min(self.train_len, self.eval_len) < need:
            raise InputError(f"config keys 'data.train_len'/'data.eval_len' must be ≥ {need} for "
                             f"{max(self.max_needles, self.train_max_needles)} needles of {self.n_digits} digits, "
                             f"got {self.train_len}, {self.eval_len}")
        if self.vocab_words > MAX_VOCAB_WORDS:
            raise InputError(f"config key 'data.vocab_words' must be ≤ {MAX_VOCAB_WORDS}, got {self.vocab_words}")


@dataclass
class BaseSection:
    """The `base` section: the retrieval model (methods.rabitqcache.base), a tiny Llama trained on
    the passkey texts, or at paper scale the hub model `hub_id`; the workflow adds the training
    seed (one of `seeds`)."""
    model: ModelConfig
    train: TrainConfig
    n_digits: PosInt
    full_lm: bool                    # loss on every next token (else on the answer digits only)
    val_texts: PosInt
    hub_id: str | None


@dataclass
class BaseConfig(BaseSection):
    """The train step's config: the `base` section plus one training seed (model init and batch order)."""
    seed: int


@dataclass
class SparseConfig:
    """The settings of SparseAttention (methods.rabitqcache.attention): the steps set method, top_p and
    budget per run, the rest is shared."""
    method: Literal["dense", "rabitq", "int4key", "quest", "oracle", "random"]
    top_p: Frac                      # rabitq, int4key: Top-p of the estimated attention
    budget: Frac                     # quest, oracle, random: fraction of the middle tokens kept
    query_bits: Literal[0, 4]        # rabitq: 4 = INT4 query, 0 = float query
    center: bool                     # rabitq: centre keys and queries (False = the no-centre ablation)
    quantize_interval: PosInt        # I: keys are encoded in whole batches of I
    skip_layers: NonNegInt           # layers 0..skip_layers-1 stay dense
    quest_page: PosInt
    rotation_seed: int
    fp16_bytes: PosInt               # bytes per K/V element in the I/O proxy (the paper's FP16 cache)
    prefill_impl: Literal["eager", "sdpa"]

    def __post_init__(self):
        if self.quantize_interval % self.quest_page:   # Quest pages tile the encoded middle exactly
            raise InputError(f"config key 'method.quest_page' ({self.quest_page}) must divide "
                             f"'method.quantize_interval' ({self.quantize_interval})")


@dataclass
class CaptureConfig:
    """Decode-time q/K/V captured for the estimator statistics."""
    n_prompts: PosInt
    n_steps: PosInt                  # decode steps: the last prompt token + n_steps − 1 generated
    batch_size: PosInt
    layers: list[NonNegInt] | None   # layers to keep (None: all)


@dataclass
class EstimatorConfig:
    """Statistics of the RaBitQ estimate on the captured (q, k) pairs: unbiasedness, RMSE, and
    coverage of the error bound at ε0 (RaBitQ, arXiv 2405.12497, §3.2)."""
    rotations: Annotated[int, Check(minimum=2)]
    pairs_per_head: PosInt
    eps0: Positive
    seed: int


@dataclass
class SparseEvalConfig:
    """Sparse evaluation: every method over the Top-p grid, generation through SparseAttention."""
    n_prompts: PosInt
    batch_size: PosInt
    top_ps: Annotated[list[Frac], Check(min_items=1, unique_items=True)]
    ref_p: Frac                      # the p of the ablations and the claims
    tail_steps: PosInt               # the prompt's last tokens decoded through the sparse path

    def __post_init__(self):
        if self.ref_p not in self.top_ps:
            raise InputError(f"config key 'sparse.ref_p' ({self.ref_p}) must be one of 'sparse.top_ps' {self.top_ps}")


@dataclass
class LmEvalConfig:
    """lm-eval tasks run through SparseAttention (paper scale)."""
    tasks: list[str]
    limit: Annotated[int, Check(minimum=1)] | None
    batch_size: PosInt
    top_p: Frac
    metadata: dict[str, Any] | None  # lm-eval TaskManager metadata (RULER: {"max_seq_lengths": [...]})


@dataclass
class Config:
    seeds: Annotated[list[NonNegInt], Check(min_items=1, unique_items=True)]   # trained models (init + batch order)
    data: DataConfig
    base: BaseSection
    method: SparseConfig
    capture: CaptureConfig
    estimator: EstimatorConfig
    sparse: SparseEvalConfig
    lm_eval: LmEvalConfig

    def __post_init__(self):
        if self.base.hub_id is not None and len(self.seeds) != 1:
            raise InputError(f"config key 'seeds' ({self.seeds}) must name one seed when 'base.hub_id' is set "
                             "(the hub model is one model)")
