"""The `pse:` section of config/scales/<scale>.yaml: the contamination protocol of "Persistent
Semantic Entities in Tool-Augmented LLM Systems" (arXiv 2608.07952; we follow its abstract, the
protocol details are our inferred design).

An agent's spec is `{"backend": "sim", <planted rates>}` (the SimAgent simulator; the step checks
the payload types) or an LLM spec (`methods.core.llm_spec.LLMSpec`, what `make_llm` takes); a
judge's is an LLM spec. Both stay mappings (`AsMapping`) and refuse keys they do not declare, a
credential among them (only `api_key_env`, the variable's name). Torch-free: loaded by file
path at workflow parse time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from methods.core.config import AsMapping, Check, PosInt, Prob
from methods.core.llm_spec import LLMSpec

Backend = Literal["sim", "openai", "hf"]
BACKENDS: tuple[str, ...] = get_args(Backend)


@dataclass
class ScenarioConfig:
    """pse.scenarios: the 2x2x2 factorial (N name binding, T event trigger, P boundary) x 4
    payload types, persistence trials, pipelines, the defence panel and clean controls."""
    seeds: PosInt                        # factorial seeds per cell (planned: 10)
    persist_seeds: PosInt                # persistence trials per type (N = T = 1, P = 0)
    pipeline_seeds: PosInt               # pipelines (planned: 20)
    stages: Annotated[int, Check(minimum=2)]   # pipeline length S (planned: 4)
    defence_seeds: PosInt                # defence panel trials per type (N = T = 1, P = 0)
    control_seeds: PosInt                # clean controls per variant (mention / no mention)
    horizon: PosInt                      # probe turns (the paper: up to turn 10)
    seed: int
    max_new_tokens: PosInt               # length limit of every agent turn (ours; not stated in the paper)


@dataclass
class SimSpec:
    """An agent spec `{"backend": "sim", ...}`: the planted rates of the simulator
    (methods/pse/sim.py SimParams), each a probability."""
    backend: Literal["sim"]
    susceptibility: dict[str, Prob]      # payload type -> s_c
    trigger_gain: Prob
    p_carry: Prob
    hazard: dict[str, Prob]              # payload type -> per-turn self-correction hazard
    q: Prob
    catch: Prob


@dataclass
class AgentConfig:
    """pse.agents[i]: one agent of the panel."""
    name: Annotated[str, Check(pattern=r"^[A-Za-z0-9_.-]+$")]
    spec: Annotated[SimSpec | LLMSpec, AsMapping()]   # the simulator, or a make_llm spec


@dataclass
class JudgeConfig:
    """pse.judge: `string` = the nonce value appears in the answer; `llm` = a binary YES/NO
    prompt to the first of `specs` (make_llm specs), temperature 0."""
    kind: Literal["string", "llm"]
    specs: list[LLMSpec]


@dataclass
class AnalysisConfig:
    conf: Annotated[float, Check(exclusive_minimum=0, exclusive_maximum=1)]   # confidence level of every interval
    min_cells_in_ci: Prob                # informational: the claim threshold lives in claims.yaml


@dataclass
class Config:
    """PSE (arXiv 2608.07952)."""
    scenarios: ScenarioConfig
    agents: Annotated[list[AgentConfig], Check(min_items=1)]
    primary: str                         # the agent whose runs the headline metrics read
    judge: JudgeConfig
    analysis: AnalysisConfig
    # open models served by the DAG (methods/core/serving/): {name: {model, engine, gpus, args}};
    # an agent's or judge's spec says `serve: <name>` instead of `base_url`
    serving: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        from methods.core.serving import check_serve_refs, check_serving

        self.serving = check_serving(self.serving, "pse.serving")
        check_serve_refs([(f"pse.agents[{i}].spec", a.spec) for i, a in enumerate(self.agents)]
                         + [(f"pse.judge.specs[{i}]", s) for i, s in enumerate(self.judge.specs)],
                         self.serving, "pse.serving")
