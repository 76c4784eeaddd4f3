"""The `verbalized_sampling` section of a scale file (config/scales/<scale>.yaml), declared once:
Verbalized Sampling (arXiv 2510.01171) — a synthetic world with a planted typicality weight α,
the α estimator and the sharpening theory, a tiny base LM, DPO, sampling with each prompting
method through the LLM backend layer, and the analysis.

Loaded by file path at workflow parse time (`methods.core.config.section_class`), so it imports
only the standard library and the torch-free parts of methods.core. The steps use these classes
(`world.py`, `lm.py`, `analysis.py`, `__main__.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Positive
from methods.core.llm_spec import ApiKeyEnv
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig

# Bounds set by the world's fixed grammar (methods/verbalized_sampling/world.py, checked against
# its word lists by tests/verbalized_sampling/test_config.py): 20 topics, and
# len(ADJS) · len(VERBS) · len(PLACES) = 10 · 8 · 8 distinct "jokes" per topic.
MAX_TOPICS = 20
GRAMMAR_SIZE = 640

# The prompting methods the sample step runs (the paper's direct, CoT, sequence, VS-Standard and
# VS-CoT prompts, arXiv 2510.01171; methods/verbalized_sampling/prompts.py).
Method = Literal["direct", "direct_cot", "sequence", "vs_standard", "vs_cot"]


@dataclass
class WorldConfig:
    """The synthetic world: topics × a grammar pool of "jokes" with a Zipf reference distribution
    π_ref, and preference pairs from an annotator with planted typicality weight α (our tiny
    design for the typicality bias of arXiv 2510.01171)."""
    n_topics: PosInt
    pool_size: PosInt                # M candidate jokes per topic
    zipf_s: Positive
    k: PosInt                        # items per list (sequence / VS)
    alpha: float                     # planted typicality weight
    n_pref_prompts: PosInt           # preference "prompts" (clusters)
    responses_per_prompt: Annotated[int, Check(minimum=2)]
    seed: int

    def __post_init__(self):
        if not 1 <= self.n_topics <= MAX_TOPICS:
            raise InputError(f"config key 'world.n_topics': must be in [1, {MAX_TOPICS}], got {self.n_topics}")
        if not self.k < self.pool_size <= GRAMMAR_SIZE:
            raise InputError(f"config key 'world.pool_size': must exceed k ({self.k}) and be at most the "
                             f"grammar's {GRAMMAR_SIZE} jokes, got {self.pool_size}")
        if not 2 <= self.responses_per_prompt <= self.pool_size:
            raise InputError(f"config key 'world.responses_per_prompt': must be in [2, pool_size], "
                             f"got {self.responses_per_prompt}")


@dataclass
class TheoryConfig:
    """DPO temperatures β of the closed-form and tabular sharpening π* ∝ π_ref^(1+α/β)."""
    betas: Annotated[list[Positive], Check(min_items=1)]


@dataclass
class PretrainConfig:
    """The tiny base LM, pre-trained on the world's direct / sequence / VS formats."""
    model: ModelConfig
    train: TrainConfig
    seed: int


@dataclass
class DPOConfig:
    """DPO of the base LM on the preference pairs (direct format)."""
    beta: Positive
    train: TrainConfig


@dataclass
class VsGenerator:
    """verbalized_sampling sample generator, a make_llm spec (methods.core.llm.make_llm); backend
    null = the DAG's tiny LM."""
    backend: Literal[None, "openai"]
    base_url: str | None
    model: str | None
    api_key_env: ApiKeyEnv | None    # the environment variable holding the key (never the key)
    concurrency: PosInt
    transport: Literal["urllib", "openai"]
    json_mode: bool
    timeout: Positive
    max_retries: NonNegInt
    # a model served by the DAG (an entry of verbalized_sampling.serving) instead of base_url; the
    # workflow hands the step base_url_file, its address file (methods/core/serving/)
    serve: str | None = None
    base_url_file: str | None = None


@dataclass
class Generators:
    """The base and the aligned model's backend-layer spec (make_llm)."""
    base: VsGenerator
    aligned: VsGenerator


@dataclass
class SampleConfig:
    """Sampling with each prompting method (the sample step's config, one model)."""
    methods: Annotated[list[Method], Check(min_items=1)]
    n: PosInt                        # samples per topic and method
    temperature: NonNeg
    top_p: Annotated[float, Check(exclusive_minimum=0, maximum=1)]
    max_new_tokens: PosInt
    seed: int


@dataclass
class SampleSection(SampleConfig):
    """The scale file's `sample`: the sampling settings and one generator per model (the workflow
    hands the sample step `generator` = `generators.<model>`)."""
    generators: Generators


@dataclass
class AnalysisConfig:
    """Metrics, the C5 SimBackend threshold sweep and the claim metrics."""
    sim_repeats: PosInt              # prompts per topic in the C5 simulation
    sim_n: PosInt                    # samples per prompt (N/k VS calls)
    sim_thresholds: Annotated[list[float], Check(min_items=2)]   # verbalized p; < 0 = no threshold
    bootstrap: PosInt
    embed: bool                      # MiniLM semantic diversity (off only in unit tests)
    seed: int


@dataclass
class Config:
    """Verbalized Sampling (methods/verbalized_sampling/, arXiv 2510.01171)"""
    world: WorldConfig
    theory: TheoryConfig
    pretrain: PretrainConfig
    dpo: DPOConfig
    sample: SampleSection
    analysis: AnalysisConfig
    # the base and the aligned model served by the DAG (methods/core/serving/): {name: {model, engine,
    # gpus, args}}; a generator says `serve: <name>` instead of base_url
    serving: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        from methods.core.serving import check_serve_refs, check_serving

        self.serving = check_serving(self.serving, "verbalized_sampling.serving")
        gens = {m: getattr(self.sample.generators, m) for m in ("base", "aligned")}
        specs = {m: {k: v for k, v in vars(g).items() if v is not None} for m, g in gens.items()}
        check_serve_refs([(f"verbalized_sampling.sample.generators.{m}", s) for m, s in specs.items()],
                         self.serving, "verbalized_sampling.serving")
        served = {m: self.serving[g.serve]["model"] for m, g in gens.items() if g.serve}
        if len(served) == 2 and (gens["base"].serve == gens["aligned"].serve or served["base"] == served["aligned"]):
            raise InputError("config key 'verbalized_sampling.sample.generators': the base and the aligned "
                             "generator must be different served models (the study compares them)")
