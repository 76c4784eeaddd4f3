"""The `memora:` section of config/scales/<scale>.yaml: Memora (arXiv 2602.03315), a harmonic
memory of primary abstractions and cue anchors with a retrieval policy (Alg. 1), against a
fact store and chunked RAG on LoCoMo / LongMemEval or a generated LoCoMo-lite.

Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from methods.core.config import Check, NonNegInt, PosInt
from methods.core.llm_spec import ApiKeyEnv, LLMSpec


@dataclass
class SynthConfig:
    """memora.data.synth: the generated LoCoMo-lite (our design): dated multi-session chats of
    two speakers with filler turns, later updates of a fact and dated events."""
    n_conversations: PosInt
    n_sessions: Annotated[int, Check(minimum=3)]
    turns_per_session: PosInt
    filler_fraction: Annotated[float, Check(minimum=0, exclusive_maximum=1)]
    max_mentions: PosInt
    n_events: Annotated[int, Check(minimum=0, maximum=4)]
    update_session: PosInt               # the session in which a persona's city or job changes
    start_date: Annotated[str, Check(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]   # YYYY-MM-DD
    seed: int


@dataclass
class DataConfig:
    """memora.data: `generated` (synth below), or LoCoMo / LongMemEval read from `path`."""
    source: Literal["generated", "locomo", "longmemeval"]
    path: str | None                     # locomo / longmemeval: the local json file
    sha256: Annotated[str, Check(pattern=r"^[0-9a-f]{64}$")] | None   # pin of that file; null = not checked
    limit: PosInt | None                 # at most this many conversations; null = all
    synth: SynthConfig


@dataclass
class LLMConfig:
    """memora.llm: the curating / policy LLM: the template simulator, or prompted through an
    OpenAI-compatible endpoint."""
    kind: Literal["template", "prompted"]
    base_url: str | None                 # prompted: an OpenAI-compatible endpoint (vLLM, hosted API)
    model: str | None                    # prompted: the model id served there
    api_key_env: ApiKeyEnv | None        # prompted: env var holding the key (read at request time)
    max_new_tokens: PosInt | None        # prompted: reply budget of each call (null: 512)
    # prompted: an open model served by the DAG (an entry of memora.serving) instead of base_url; the
    # workflow hands the step base_url_file, its address file (methods/core/serving/)
    serve: str | None = None
    base_url_file: str | None = None


@dataclass
class BuildConfig:
    """memora.build: consolidation of a new abstraction against the store."""
    consolidate_k: PosInt                # R(a_i): top-k existing abstractions (not stated in the paper; our choice 5)
    gamma: Annotated[float, Check(minimum=-1, maximum=1)]   # U = {m in R: cos >= gamma} (not stated; our choice 0.7)
    chunk_turns: PosInt                  # RAG chunk size in turns


@dataclass
class PolicyConfig:
    """memora.policy: retrieval (Alg. 1)."""
    k: PosInt                            # semantic top-k (also the policy's initial working set)
    expand: PosInt                       # frontier entries moved into W per EXPAND
    budget: NonNegInt                    # B: actions after the initial lookup (each costs 1)


@dataclass
class QAConfig:
    """memora.qa: answer generation from each retrieved context by the answering LLM, and the
    LLM-judge scoring of those answers against the gold answers (LoCoMo: Mem0's CORRECT/WRONG
    protocol, category 5 excluded; LongMemEval: its evaluate_qa yes/no protocol per question
    type). Both are `methods.core.llm.make_llm` specs (the paper: gpt-4.1-mini answers,
    gpt-4o-mini judges)."""
    answer: LLMSpec | None               # make_llm spec of the answering LLM (required)
    judge: LLMSpec | None                # make_llm spec of the judge LLM (required)
    answer_max_new_tokens: PosInt        # reply budget of an answer
    judge_max_new_tokens: PosInt         # reply budget of a verdict
    seed: int
    # the "store:policy" runs (of memora.runs) whose contexts are answered and judged
    runs: Annotated[list[Annotated[str, Check(pattern=r"^(rag|factstore|memora|memora_noanchor):(semantic|policy)$")]],
                    Check(min_items=1)]


@dataclass
class Config:
    """Memora (arXiv 2602.03315)."""
    data: DataConfig
    embedder: Literal["minilm", "hash"]  # hash: tests / smoke only
    llm: LLMConfig
    build: BuildConfig
    policy: PolicyConfig
    # store:policy, stores rag | factstore | memora | memora_noanchor, policies semantic | policy
    runs: Annotated[list[Annotated[str, Check(pattern=r"^(rag|factstore|memora|memora_noanchor):(semantic|policy)$")]],
                    Check(min_items=1)]
    qa: QAConfig | None = None           # answer generation + LLM judge (null: retrieval metrics only)
    # open models served by the DAG (methods/core/serving/): {name: {model, engine, gpus, args}}; memora.llm
    # (serve: <name>) and the qa specs (serve: <name>) use them
    serving: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        from methods.core.serving import check_serve_refs, check_serving

        self.serving = check_serving(self.serving, "memora.serving")
        specs = [("memora.llm", {k: v for k, v in vars(self.llm).items() if v is not None})]
        if self.qa is not None:
            specs += [(f"memora.qa.{k}", getattr(self.qa, k)) for k in ("answer", "judge")]
        check_serve_refs(specs, self.serving, "memora.serving")
