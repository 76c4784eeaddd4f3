"""The `memora:` section of config/scales/<scale>.yaml: Memora (arXiv 2602.03315), a harmonic
memory of primary abstractions and cue anchors with a retrieval policy (Alg. 1), against a
fact store and chunked RAG on LoCoMo / LongMemEval or a generated LoCoMo-lite.

Torch-free: loaded by file path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from methods.core.config import Check, NonNegInt, PosInt


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
    api_key_env: str | None              # prompted: env var holding the key (read at request time)
    max_new_tokens: PosInt | None        # prompted: reply budget of each call (null: 512)


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
