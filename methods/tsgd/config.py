"""The `tsgd:` section of config/scales/<scale>.yaml: experience-library optimisation with
textual SGD ("Textual Stochastic Gradient Descent: Discrete Optimization of External Memory for
Reasoning Language Agents", ICML 2026, OpenReview zVv11MhFLD; only the abstract is public, the
minibatch and op sizes, the verification tests V1/V2, the eviction and the simulator are our
inferred design).

Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from methods.core.config import Check, NonNeg, NonNegInt, PosInt, Prob
from methods.core.llm_spec import LLMSpec
from methods.core.results import InputError


@dataclass
class HubTestSet:
    """tsgd.data.test_hubs[i]: one hub test set (paper scale: MATH-500, AIME 2024, AIME 2025)."""
    name: str                            # the `type` of its rows
    id: str                              # hub dataset id
    split: str
    question: str                        # field of the question
    answer: str                          # field of the reference answer


@dataclass
class DataConfig:
    """tsgd.data: MATH-lite (`synthetic`, K = n_types pitfall types) or MATH / AIME from the hub."""
    source: Literal["synthetic", "hub"]
    n_train: PosInt
    n_val: PosInt
    n_test: PosInt
    n_types: Annotated[int, Check(minimum=1, maximum=12)]
    seed: int
    train_hub: str | None                # paper: EleutherAI/hendrycks_math
    test_hubs: list[HubTestSet]          # paper: MATH-500, AIME 2024, AIME 2025


@dataclass
class SolverParams:
    """tsgd.llm.sim_solver: logit coefficients of the simulated solver (sigmoid(t0) bare,
    sigmoid(t0 + t1) with the right rule in context, ...; see methods/tsgd/sim.py)."""
    t0: float
    t1: float
    t2: float
    t3: float
    t4: float
    t5: float


@dataclass
class ReflectorParams:
    """tsgd.llm.sim_reflector: probabilities of the simulated reflector's proposals."""
    p_good: Prob
    p_instance: Prob
    p_delete: Prob


@dataclass
class LLMConfig:
    """tsgd.llm: the solver and reflector: the simulator (`sim`) or two endpoints."""
    kind: Literal["sim", "endpoint"]
    # [solver, reflector] make_llm specs (kind endpoint); [] with the simulator
    endpoints: Annotated[list[LLMSpec], Check(max_items=2)]
    sim_solver: SolverParams
    sim_reflector: ReflectorParams
    seed: int


@dataclass
class OptimConfig:
    """tsgd.tsgd: the textual-SGD optimiser (methods/tsgd/optim.py)."""
    batch_size: PosInt                   # b
    val_batch: PosInt                    # |V_t|
    lr: PosInt                           # eta: max accepted ops per step
    k_repair: PosInt                     # V1 samples (majority)
    temperature: NonNeg                  # V1 sampling temperature
    epochs: PosInt
    max_full_context: NonNegInt          # all rules in context up to this size, else top_r retrieval
    top_r: PosInt
    beta: Prob                           # utility EMA
    eval_every: PosInt                   # full-validation accuracy every this many steps (and at the end)
    max_new_tokens: PosInt
    seed: int


@dataclass
class VariantConfig:
    """tsgd.variants.<name>: one ablation of the optimiser."""
    capacity: PosInt | None              # C; null = no budget
    verify: Literal["dual", "local", "none"]


@dataclass
class RagConfig:
    """tsgd.rag: the append-only static-RAG baseline, test accuracy vs memory size."""
    k: PosInt
    checkpoints: Annotated[list[PosInt], Check(min_items=1)]   # memory sizes evaluated
    seed: int


@dataclass
class LmEvalConfig:
    """tsgd.lm_eval (paper scale): the lm-eval anchor. The served solver (llm.endpoints[0]) is
    evaluated by lm-eval itself (model `local-chat-completions` on the endpoint's
    /chat/completions, chat template applied by the server) on held-out benchmark tasks, once
    zero-shot (our solver system prompt alone) and once with `variant`'s optimised library in the
    system prompt: the paper's test accuracy gain over zero-shot on MATH / AIME, scored by
    lm-eval instead of our checker. Reported beside the claims (summary.json `lm_eval`). No
    tasks (tiny, smoke): no step."""
    tasks: list[str] = field(default_factory=list)
    variant: str = "full"                # whose best-validation library goes in the system prompt
    limit: PosInt | None = None          # lm-eval --limit (per task); null = every problem
    num_concurrent: PosInt = 1           # requests in flight at once
    max_retries: NonNegInt = 3           # lm-eval's retries per request
    timeout: PosInt = 300                # seconds per request


@dataclass
class AnalysisConfig:
    flat_from: Prob                      # the curve counts as flat from this fraction of training on


@dataclass
class Config:
    """TSGD (OpenReview zVv11MhFLD)."""
    data: DataConfig
    llm: LLMConfig
    embedder: Literal["hash", "minilm"]
    tsgd: OptimConfig
    variants: dict[str, VariantConfig]   # `full` required (the aggregate reads it)
    rag: RagConfig
    analysis: AnalysisConfig
    lm_eval: LmEvalConfig = field(default_factory=LmEvalConfig)

    def __post_init__(self):
        if "full" not in self.variants:
            raise InputError("missing config key 'tsgd.variants.full'")
        if self.lm_eval.tasks:
            if self.lm_eval.variant not in self.variants:
                raise InputError(f"tsgd.lm_eval.variant: no variant {self.lm_eval.variant!r} "
                                 f"(have {sorted(self.variants)})")
            if self.llm.kind != "endpoint" or (self.llm.endpoints or [{}])[0].get("backend") != "openai":
                raise InputError("tsgd.lm_eval.tasks needs llm.kind endpoint with an openai solver "
                                 "endpoint (llm.endpoints[0]): lm-eval talks to it over HTTP")
