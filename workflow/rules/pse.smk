# PSE (Persistent Semantic Entities, ICML 2026 poster 60521): the contamination protocol —
# scenario factorial (name binding × event trigger × boundary × 4 payload types), 10-turn probes
# across sessions / tools / agents, 4-agent pipelines, two defences, judge, Wilson CIs, claims.
# Tiny scale: the agent is SimAgent, a simulator with planted rates (methods/pse/sim.py).
include: "helpers/pse.smk"  # its config helpers


PSE_DIR = f"{RESULTS}/{{scale}}/pse"


rule pse_scenarios:
    """Scenarios: 2×2×2×4 cells × seeds, persistence trials, pipelines, defence panel, controls."""
    input:
        code=code("pse", "scenarios"),
    output:
        f"{PSE_DIR}/scenarios.jsonl",
    log:
        f"{PSE_DIR}/logs/scenarios.log",
    benchmark:
        f"{PSE_DIR}/benchmarks/pse_scenarios.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "pse", "scenarios")),
    shell:
        "python -m methods.pse scenarios --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule pse_run:
    """Factorial + persistence trials of one agent (tool injection, boundary, 10 probe turns)."""
    input:
        scenarios=f"{PSE_DIR}/scenarios.jsonl",
        served=lambda wc: pse_served_agent(wc.scale, wc.pse_agent),
        code=code("pse", "run"),
    output:
        f"{PSE_DIR}/transcripts/runs/{{pse_agent}}.jsonl",
    log:
        f"{PSE_DIR}/logs/run/{{pse_agent}}.log",
    benchmark:
        f"{PSE_DIR}/benchmarks/pse_run__{{pse_agent}}.tsv"
    wildcard_constraints:
        pse_agent=r"[A-Za-z0-9_.\-]+",
    threads: client_threads(lambda wc: pse_served_agent(wc.scale, wc.pse_agent))
    params:
        cfg=lambda wc: as_json(pse_step_agent_cfg(wc.scale, wc.pse_agent)),
    shell:
        "python -m methods.pse run --config {params.cfg:q} --scenarios {input.scenarios:q} "
        "--out {output:q} > {log:q} 2>&1"


rule pse_pipeline:
    """S-stage multi-agent pipelines (planner → researcher → writer → reviewer) of the primary agent."""
    input:
        scenarios=f"{PSE_DIR}/scenarios.jsonl",
        served=lambda wc: pse_served_agent(wc.scale, hp(wc.scale, "pse", "primary")),
        code=code("pse", "pipeline"),
    output:
        f"{PSE_DIR}/transcripts/pipeline.jsonl",
    log:
        f"{PSE_DIR}/logs/pipeline.log",
    benchmark:
        f"{PSE_DIR}/benchmarks/pse_pipeline.tsv"
    threads: client_threads(lambda wc: pse_served_agent(wc.scale, hp(wc.scale, "pse", "primary")))
    params:
        cfg=lambda wc: as_json(pse_step_agent_cfg(wc.scale, hp(wc.scale, "pse", "primary"))),
    shell:
        "python -m methods.pse pipeline --config {params.cfg:q} --scenarios {input.scenarios:q} "
        "--out {output:q} > {log:q} 2>&1"


rule pse_defend:
    """Defence panel and clean controls under one defence (none / D1 self-verify / D2 keyword)."""
    input:
        scenarios=f"{PSE_DIR}/scenarios.jsonl",
        served=lambda wc: pse_served_agent(wc.scale, hp(wc.scale, "pse", "primary")),
        code=code("pse", "defend"),
    output:
        f"{PSE_DIR}/transcripts/def_{{pse_defence}}.jsonl",
    log:
        f"{PSE_DIR}/logs/defend/{{pse_defence}}.log",
    benchmark:
        f"{PSE_DIR}/benchmarks/pse_defend__{{pse_defence}}.tsv"
    wildcard_constraints:
        pse_defence="none|selfverify|keyword",
    threads: client_threads(lambda wc: pse_served_agent(wc.scale, hp(wc.scale, "pse", "primary")))
    params:
        cfg=lambda wc: as_json(pse_step_agent_cfg(wc.scale, hp(wc.scale, "pse", "primary"))),
    shell:
        "python -m methods.pse defend --config {params.cfg:q} --defence {wildcards.pse_defence:q} "
        "--scenarios {input.scenarios:q} --out {output:q} > {log:q} 2>&1"


rule pse_metrics:
    """Judge (string match / LLM), rates with Wilson CIs, persistence fit, compounding vs closed
    form, defence effects, summary.json, tables and the figure."""
    input:
        scenarios=f"{PSE_DIR}/scenarios.jsonl",
        runs=lambda wc: pse_runs(wc.scale),
        pipeline=f"{PSE_DIR}/transcripts/pipeline.jsonl",
        defences=lambda wc: pse_defences(wc.scale),
        served=lambda wc: pse_served_judge(wc.scale),
        code=code("pse", "metrics"),
    output:
        summary=f"{PSE_DIR}/summary.json",
        tables=directory(f"{PSE_DIR}/tables"),
        figure=report(
            f"{PSE_DIR}/figures/contamination.png",
            caption="../../methods/pse/report.rst",
            category="pse",
            labels={"scale": "{scale}", "figure": "contamination rates, persistence, compounding, defences"},
        ),
        caption=f"{PSE_DIR}/figures/contamination.caption.txt",
    log:
        f"{PSE_DIR}/logs/metrics.log",
    benchmark:
        f"{PSE_DIR}/benchmarks/pse_metrics.tsv"
    threads: client_threads(lambda wc: pse_served_judge(wc.scale))
    params:
        cfg=lambda wc: as_json(pse_metrics_cfg(wc.scale)),
    shell:
        "python -m methods.pse metrics --config {params.cfg:q} --scenarios {input.scenarios:q} "
        "--runs {input.runs:q} --pipeline {input.pipeline:q} --defences {input.defences:q} "
        "--summary {output.summary:q} --figure {output.figure:q} --tables {output.tables:q} > {log:q} 2>&1"


FIGURES["pse"] = lambda scale: [f"{RESULTS}/{scale}/pse/figures/contamination.png"]
