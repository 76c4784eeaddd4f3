"""The one declaration of an LLM spec in the scale files: the mapping `methods.core.llm.make_llm`
takes, e.g. `{backend: openai, base_url: ..., model: ..., api_key_env: OPENAI_API_KEY}`.

Every place a scale file holds such a spec types it as `LLMSpec` (pse agents and judges, memora's
answering and judging LLMs, tsgd's endpoints), so an unknown key is refused when the workflow
loads, before any job: in particular a credential, whose only place is the *name* of the
environment variable that holds it (`api_key_env`, read by the step at request time). A key
written into the spec itself would otherwise travel in the step's `--config` into Snakemake's
job metadata and logs. The keys are make_llm's (`_SPEC_KEYS` there; tests/core/test_llm_spec.py
keeps the two in step) plus `serve` (a model the DAG serves, methods/core/serving/) and what the
workflow resolves it to (`base_url_file`, `wait_s`). Which keys a backend needs at run time
(`model`, `base_url` or `serve`) make_llm checks; here a spec may leave them out.

Torch-free: the workflow loads it at parse time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from .config import AsMapping, Check, NonNeg, NonNegInt, PosInt, Positive

# The name of the environment variable that holds a key (never the key): an error does not
# repeat the value, in case a key was pasted here.
ApiKeyEnv = Annotated[str, Check(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", redact=True)]
ServeName = Annotated[str, Check(pattern=r"^[A-Za-z0-9_.-]+$")]


@dataclass
class OpenAISpec:
    """An OpenAI-compatible endpoint (a hosted API, vLLM, or a model the DAG serves)."""
    backend: Literal["openai"]
    base_url: str | None = None
    model: str | None = None
    api_key_env: ApiKeyEnv | None = None   # null: no key sent (a local server)
    timeout: Positive = 60.0
    max_retries: NonNegInt = 3
    batch_size: PosInt = 32
    backoff: NonNeg = 1.0
    concurrency: PosInt = 1
    transport: Literal["urllib", "openai"] = "urllib"
    json_mode: bool = False
    instruction_following: bool = True
    serve: ServeName | None = None         # a model served by the DAG, instead of base_url
    base_url_file: str | None = None       # what the workflow resolves `serve` to (the step's spec)
    wait_s: NonNeg = 3600.0                # how long the step waits for that address file


@dataclass
class HFSpec:
    """A transformers model in the step's own process."""
    backend: Literal["hf"]
    model: str
    device: str | None = None
    dtype: str | None = None
    batch_size: PosInt = 16


LLMSpec = Annotated[OpenAISpec | HFSpec, AsMapping("LLMSpec")]
