"""The paper-scale path: TSGD talking to OpenAI-compatible endpoints (our llm_server serving the
simulators over HTTP) reproduces the in-process run exactly: same ops, same library, same trace."""
from methods.core.llm import OpenAIBackend
from methods.core.llm_server import LLMServer
from methods.tsgd.optim import Agent, train_tsgd
from methods.tsgd.sim import ReflectorParams, SimReflector, SimSolver, classify

from .test_core import PARAMS, _cfg, _world


def test_http_endpoints_match_in_process_run():
    data, index = _world()
    train, val = data["train"][:48], data["val"][:24]
    solver, reflector = SimSolver(PARAMS, index), SimReflector(ReflectorParams(0.6, 0.25, 0.5), index)
    cls = lambda r: classify(r, index)  # noqa: E731
    ref = train_tsgd(Agent(solver, reflector, None, _cfg("dual", 30)), train, val, cls, log=lambda *_: None)
    with LLMServer(solver).start() as s1, LLMServer(reflector).start() as s2:
        http = [OpenAIBackend(s.base_url, "local", api_key_env=None) for s in (s1, s2)]
        got = train_tsgd(Agent(*http, None, _cfg("dual", 30)), train, val, cls, log=lambda *_: None)
    assert got["trace"] == ref["trace"]
    assert got["ops"] == ref["ops"] and len(ref["ops"]) > 0
    assert got["library"].rules == ref["library"].rules
