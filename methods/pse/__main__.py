"""CLI of the PSE contamination protocol: one sub-command per DAG step.

    python -m methods.pse <step> --config '<json>' [files...]

Steps: scenarios → run (per agent) / pipeline / defend (per defence) → metrics.
`--config` is the step's section of `config/scales/<scale>.yaml` (as built in workflow/rules/helpers/pse.smk)."""
from __future__ import annotations

import json
import sys
import time

from methods.core import cli
from methods.core.config import from_json
from methods.core.results import InputError, read_jsonl, write_jsonl


def _agent(a):
    from .config import AgentConfig
    from .run import make_agent_llm

    cfg = from_json(AgentConfig, a.config, "agent")
    return cfg, make_agent_llm(cfg.spec, f"agent {cfg.name}.spec")


def _stamp(rows: list[dict], llm, scenarios: list[dict]) -> list[dict]:
    """Each transcript row of a real model gets `llm`: what answered (the served model's address
    where the DAG served it) and the sampling (temperature 0, the scenario's turn budget and
    seed); simulator rows are left as they were. No API key enters it."""
    from methods.core.llm import OpenAIBackend, llm_provenance

    if not isinstance(llm, OpenAIBackend):
        return rows
    base, by_id = llm_provenance(llm), {s["id"]: s for s in scenarios}
    return [{**r, "llm": {**base, "sampling": {
        "temperature": 0.0, "seed": by_id.get(r.get("id"), {}).get("seed"),
        "max_new_tokens": by_id.get(r.get("id"), {}).get("max_new_tokens", 200)}}} for r in rows]


def _scenarios(a):
    from .config import ScenarioConfig
    from .scenarios import build

    rows = build(from_json(ScenarioConfig, a.config, "pse.scenarios"))
    write_jsonl(a.out, rows)
    print(f"scenarios: {len(rows)}", file=sys.stderr)


def _run(a):
    from .run import run_kind

    cfg, llm = _agent(a)
    t0 = time.perf_counter()
    scen = read_jsonl(a.scenarios)
    rows = _stamp(run_kind(scen, llm, ("factorial", "persistence")), llm, scen)
    write_jsonl(a.out, rows)
    print(f"run {cfg.name}: {len(rows)} trials, {sum(r['n_calls'] for r in rows)} LLM calls "
          f"in {time.perf_counter() - t0:.1f}s", file=sys.stderr)


def _pipeline(a):
    from .run import run_pipelines

    cfg, llm = _agent(a)
    scen = read_jsonl(a.scenarios)
    write_jsonl(a.out, _stamp(run_pipelines(scen, llm), llm, scen))


def _defend(a):
    from .run import run_defence

    if a.defence not in ("none", "selfverify", "keyword"):
        raise InputError(f"--defence: expected none, selfverify or keyword, got {a.defence!r}")
    cfg, llm = _agent(a)
    scen = read_jsonl(a.scenarios)
    write_jsonl(a.out, _stamp(run_defence(scen, llm, a.defence), llm, scen))


def _metrics(a):
    import dataclasses
    from pathlib import Path

    import pandas as pd

    from methods.core.config import from_dict
    from methods.core.results import write_metrics, write_text

    from .analysis import analyse, figure
    from .config import AnalysisConfig, JudgeConfig
    from .run import judge, reference_labels

    t0 = time.perf_counter()
    cfg = json.loads(a.config)
    for k in ("analysis", "judge", "primary", "planted"):
        if k not in cfg:
            raise InputError(f"metrics: config key {k!r} is missing")
    acfg = from_dict(AnalysisConfig, cfg["analysis"], "pse.analysis")
    from_dict(JudgeConfig, cfg["judge"], "pse.judge")
    scen = {s["id"]: s for s in read_jsonl(a.scenarios)}
    labels, served = {}, {}
    judged: list[tuple[list[dict], list[list[int]]]] = []   # the primary agent's answers and their labels
    for path in a.runs:
        rows = read_jsonl(path)
        if rows and "llm" in rows[0]:
            served[Path(path).stem] = rows[0]["llm"]
        lab = judge(scen, rows, cfg["judge"])
        labels[Path(path).stem] = dict(zip([r["id"] for r in rows], lab))
        if Path(path).stem == cfg["primary"]:
            judged.append((rows, lab))
    prow = read_jsonl(a.pipeline)
    plab = judge(scen, prow, cfg["judge"])
    pipe = dict(zip([r["id"] for r in prow], plab))
    judged.append((prow, plab))
    defs = {}
    for path in a.defences:
        rows = read_jsonl(path)
        drows = [{"id": r["id"], "answers": [r["draft"]]} for r in rows]
        final, draft = judge(scen, rows, cfg["judge"]), judge(scen, drows, cfg["judge"])
        judged += [(rows, final), (drows, draft)]
        defs[Path(path).stem.removeprefix("def_")] = {
            r["id"]: {"final": f[0], "draft": d[0], "flagged": r["flagged"]} for r, f, d in zip(rows, final, draft)}
    planted = cfg["planted"]
    # judge agreement: the judge's labels of the primary agent's answers against reference labels
    all_rows = [r for rows, _ in judged for r in rows]
    ref = reference_labels(scen, all_rows, cfg["judge"], planted is not None)
    agreement = None if ref is None else (
        [y for _, lab in judged for ys in lab for y in ys], [y for ys in ref[0] for y in ys], ref[1])
    metrics, tables = analyse(scen, labels, pipe, defs, planted, cfg["primary"], acfg, agreement)
    out = Path(a.tables)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        write_text(out / f"{name}.csv", "# Generated by python -m methods.pse metrics\n" + pd.DataFrame(rows).to_csv(index=False))
    metrics["config"] = {"analysis": dataclasses.asdict(acfg), "judge": cfg["judge"]["kind"]}
    write_metrics(a.summary, metrics, cfg, None, time.perf_counter() - t0, llm=_judge_provenance(cfg["judge"], served))
    figure(tables, metrics, a.figure, planted)


def _judge_provenance(judge_cfg: dict, agents: dict) -> dict | None:
    """The real models behind the summary: each agent's (from its transcripts) and each LLM judge's
    (temperature 0, 3 tokens); None where every agent is the simulator and the judge is string match."""
    from methods.core.llm import llm_provenance

    from .run import make_agent_llm

    judges = [] if judge_cfg["kind"] != "llm" else [
        llm_provenance(make_agent_llm(s, f"judge.specs[{i}]"), {"temperature": 0.0, "max_new_tokens": 3, "seed": 0})
        for i, s in enumerate(judge_cfg["specs"][:2])]
    return {"agents": agents, "judges": judges} if agents or judges else None


def build_parser():
    parser, sub = cli.subcommands("python -m methods.pse", __doc__.splitlines()[0])
    s = cli.config_step(sub, "scenarios", _scenarios, "scenario factorial, persistence, pipelines, defences", "out")
    s.set_defaults(writes_data="out")  # one file: cli writes its sidecar <file>.manifest.json
    cli.config_step(sub, "run", _run, "factorial + persistence trials of one agent", "scenarios", "out")
    cli.config_step(sub, "pipeline", _pipeline, "multi-agent pipelines", "scenarios", "out")
    s = cli.config_step(sub, "defend", _defend, "defence panel + clean controls", "scenarios", "out")
    s.add_argument("--defence", required=True)
    s = cli.config_step(sub, "metrics", _metrics, "judge, rates, CIs, claim metrics, figure",
                        "scenarios", "pipeline", "summary", "figure", "tables")
    s.add_argument("--runs", nargs="+", required=True)
    s.add_argument("--defences", nargs="+", required=True)
    return parser


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
