# TSGD (ICML 2026, OpenReview zVv11MhFLD): MATH-lite (tiny) or MATH/AIME (paper) -> zero-shot and
# append-only static RAG -> one TSGD run per variant (budget / verification ablations) -> table,
# figure and claims (methods/tsgd/). Tiny/smoke use a seeded solver/reflector simulator.
TS = f"{RESULTS}/{{scale}}/tsgd"


wildcard_constraints:
    tsvariant="[A-Za-z0-9_]+",


rule tsgd_data:
    """train/val/test problems with exact answers."""
    input:
        code=code("tsgd", "data"),
    output:
        directory(f"{TS}/data"),
    log:
        f"{TS}/logs/data.log",
    benchmark:
        f"{TS}/benchmarks/tsgd_data.tsv"
    params:
        cfg=lambda wc: as_json(tsgd_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.tsgd data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule tsgd_baselines:
    """Zero-shot and append-only static RAG (test accuracy vs stored experiences)."""
    input:
        data=f"{TS}/data",
        code=code("tsgd", "baselines"),
    output:
        out=f"{TS}/baselines.json",
        curve=f"{TS}/rag_curve.csv",
    log:
        f"{TS}/logs/baselines.log",
    benchmark:
        f"{TS}/benchmarks/tsgd_baselines.tsv"
    params:
        cfg=lambda wc: as_json(tsgd_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        # no gpu: the solver and reflector are LLM endpoints (config `endpoints`) this job calls
    shell:
        "python -m methods.tsgd baselines --config {params.cfg:q} --data {input.data} "
        "--out {output.out} --curve {output.curve} > {log} 2>&1"


rule tsgd_train:
    """One TSGD variant: best-validation library, per-step trace, op log, test accuracy."""
    input:
        data=f"{TS}/data",
        code=code("tsgd", "train"),
    output:
        out=f"{TS}/libs/{{tsvariant}}.json",
        trace=f"{TS}/traces/{{tsvariant}}.csv",
    log:
        f"{TS}/logs/train_{{tsvariant}}.log",
    benchmark:
        f"{TS}/benchmarks/tsgd_train__{{tsvariant}}.tsv"
    params:
        cfg=lambda wc: as_json(tsgd_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        # no gpu: the solver and reflector are LLM endpoints (config `endpoints`) this job calls
    shell:
        "python -m methods.tsgd train --config {params.cfg:q} --variant {wildcards.tsvariant} "
        "--data {input.data} --out {output.out} --trace {output.trace} > {log} 2>&1"


rule tsgd_aggregate:
    """Test table, claim metrics (summary.json) and the accuracy / library-size figure."""
    input:
        baselines=f"{TS}/baselines.json",
        runs=lambda wc: tsgd_outputs(wc.scale, "libs", "json"),
        traces=lambda wc: tsgd_outputs(wc.scale, "traces", "csv"),
        code=code("tsgd", "aggregate"),
    output:
        table=f"{TS}/test.csv",
        summary=f"{TS}/summary.json",
        figure=report(
            f"{TS}/figures/tsgd_curves.png",
            caption="../report/tsgd.rst",
            category="tsgd",
            labels={"scale": "{scale}", "figure": "accuracy and library size over steps"},
        ),
    log:
        f"{TS}/logs/aggregate.log",
    benchmark:
        f"{TS}/benchmarks/tsgd_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(tsgd_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.tsgd aggregate --config {params.cfg:q} --baselines {input.baselines} "
        "--runs {input.runs} --traces {input.traces} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["tsgd"] = lambda scale: [f"{RESULTS}/{scale}/tsgd/figures/tsgd_curves.png"]
