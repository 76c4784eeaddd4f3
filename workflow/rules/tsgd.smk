# TSGD (ICML 2026, OpenReview zVv11MhFLD): MATH-lite (tiny) or MATH/AIME (paper) -> zero-shot and
# append-only static RAG -> one TSGD run per variant (budget / verification ablations) -> table,
# figure and claims (methods/tsgd/); paper scale adds the lm-eval anchor on the served solver
# (tsgd_lm_eval). Tiny/smoke use a seeded solver/reflector simulator. Every step is CPU work or
# an HTTP client of the LLM endpoints: no GPU (the GPU is the vLLM server's).
include: "helpers/tsgd.smk"  # its config helpers


TSGD_DIR = f"{RESULTS}/{{scale}}/tsgd"


rule tsgd_data:
    """train/val/test problems with exact answers."""
    input:
        code=code("tsgd", "data"),
    output:
        directory(f"{TSGD_DIR}/data"),
    log:
        f"{TSGD_DIR}/logs/data.log",
    benchmark:
        f"{TSGD_DIR}/benchmarks/tsgd_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "tsgd")),
    shell:
        "python -m methods.tsgd data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule tsgd_baselines:
    """Zero-shot and append-only static RAG (test accuracy vs stored experiences)."""
    input:
        data=f"{TSGD_DIR}/data",
        code=code("tsgd", "baselines"),
    output:
        out=f"{TSGD_DIR}/baselines.json",
        curve=f"{TSGD_DIR}/rag_curve.csv",
    log:
        f"{TSGD_DIR}/logs/baselines.log",
    benchmark:
        f"{TSGD_DIR}/benchmarks/tsgd_baselines.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "tsgd")),
    # a CPU step (no gpu): the solver and reflector are LLM endpoints (config `endpoints`) it calls
    shell:
        "python -m methods.tsgd baselines --config {params.cfg:q} --data {input.data:q} "
        "--out {output.out:q} --curve {output.curve:q} > {log:q} 2>&1"


rule tsgd_train:
    """One TSGD variant: best-validation library, per-step trace, op log, test accuracy."""
    input:
        data=f"{TSGD_DIR}/data",
        code=code("tsgd", "train"),
    output:
        out=f"{TSGD_DIR}/libs/{{tsvariant}}.json",
        trace=f"{TSGD_DIR}/traces/{{tsvariant}}.csv",
    log:
        f"{TSGD_DIR}/logs/train_{{tsvariant}}.log",
    benchmark:
        f"{TSGD_DIR}/benchmarks/tsgd_train__{{tsvariant}}.tsv"
    wildcard_constraints:
        tsvariant="[A-Za-z0-9_]+",
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "tsgd")),
    # a CPU step (no gpu): the solver and reflector are LLM endpoints (config `endpoints`) it calls
    shell:
        "python -m methods.tsgd train --config {params.cfg:q} --variant {wildcards.tsvariant:q} "
        "--data {input.data:q} --out {output.out:q} --trace {output.trace:q} > {log:q} 2>&1"


rule tsgd_lm_eval:
    """Paper scale (tsgd.lm_eval.tasks): lm-eval's local-chat-completions on the served solver,
    zero-shot and with the optimised library in the system prompt (the lm-eval anchor)."""
    input:
        library=lambda wc: f"{RESULTS}/{wc.scale}/tsgd/libs/{hp(wc.scale, 'tsgd')['lm_eval']['variant']}.json",
        code=code("tsgd", "lm_eval"),
    output:
        f"{TSGD_DIR}/lm_eval.json",
    log:
        f"{TSGD_DIR}/logs/lm_eval.log",
    benchmark:
        f"{TSGD_DIR}/benchmarks/tsgd_lm_eval.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "tsgd")),
    # a CPU step (no gpu): lm-eval sends HTTP requests to the solver endpoint (config `endpoints`)
    shell:
        "python -m methods.tsgd lm_eval --config {params.cfg:q} --library {input.library:q} "
        "--out {output:q} > {log:q} 2>&1"


rule tsgd_aggregate:
    """Test table, claim metrics (summary.json) and the accuracy / library-size figure."""
    input:
        baselines=f"{TSGD_DIR}/baselines.json",
        runs=lambda wc: tsgd_outputs(wc.scale, "libs", "json"),
        traces=lambda wc: tsgd_outputs(wc.scale, "traces", "csv"),
        lm_eval=lambda wc: tsgd_lm_eval_output(wc.scale),
        code=code("tsgd", "aggregate"),
    output:
        table=f"{TSGD_DIR}/test.csv",
        summary=f"{TSGD_DIR}/summary.json",
        figure=report(
            f"{TSGD_DIR}/figures/tsgd_curves.png",
            caption="../../methods/tsgd/report.rst",
            category="tsgd",
            labels={"scale": "{scale}", "figure": "accuracy and library size over steps"},
        ),
    log:
        f"{TSGD_DIR}/logs/aggregate.log",
    benchmark:
        f"{TSGD_DIR}/benchmarks/tsgd_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "tsgd")),
        lm_eval=lambda wc, input: f"--lm_eval {shell_words(input.lm_eval)}" if input.lm_eval else "",
    shell:
        "python -m methods.tsgd aggregate --config {params.cfg:q} --baselines {input.baselines:q} "
        "--runs {input.runs:q} --traces {input.traces:q} {params.lm_eval} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["tsgd"] = lambda scale: [f"{RESULTS}/{scale}/tsgd/figures/tsgd_curves.png"]
