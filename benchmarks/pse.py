"""PSE harness throughput: agent turns per second with the planted-rate simulator called
in-process vs the same simulator served over HTTP by methods.core.llm_server (OpenAIBackend,
urllib transport), and the per-request overhead of the HTTP path.

    python benchmarks/pse.py [--trials 40] [--out benchmarks/out/pse.json]

Trials are factorial scenarios (10 probe turns, ~22 chat calls each); the HTTP transcripts are
asserted identical to the in-process ones."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--out", default="benchmarks/out/pse.json")
    a = ap.parse_args()
    from methods.core.llm import OpenAIBackend
    from methods.core.llm_server import LLMServer
    from methods.pse.agent import run_trial
    from methods.pse.scenarios import ScenarioConfig, build
    from methods.pse.sim import SimAgent, SimParams

    sim = SimAgent(SimParams({"factual": 0.6, "preference": 0.9, "persona": 0.8, "instruction": 0.85},
                             0.5, 0.7, {"factual": 0.3}, 0.25, 0.6))
    sc = [s for s in build(ScenarioConfig(8, 1, 1, 4, 1, 1, 10, 0)) if s["kind"] == "factorial"][:a.trials]
    res = {}
    t0 = time.perf_counter()
    local = [run_trial(s, sim) for s in sc]
    res["inproc_s"] = time.perf_counter() - t0
    calls = sum(r["n_calls"] for r in local)
    with LLMServer(sim, model_name="sim") as srv:
        remote_llm = OpenAIBackend(srv.base_url, "sim", api_key_env=None)
        t0 = time.perf_counter()
        remote = [run_trial(s, remote_llm) for s in sc]
        res["http_s"] = time.perf_counter() - t0
    assert [r["answers"] for r in remote] == [r["answers"] for r in local]
    res.update(trials=len(sc), chat_calls=calls, inproc_calls_per_s=calls / res["inproc_s"],
               http_calls_per_s=calls / res["http_s"],
               http_overhead_ms_per_call=1e3 * (res["http_s"] - res["inproc_s"]) / calls,
               loadavg=Path("/proc/loadavg").read_text().split()[:3])
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
