# AGoQ (arXiv 2605.00539): the PCFG + arithmetic corpus, data-parallel training of each bit-policy
# variant over 2 real gloo processes (LAAQ saved-activation quantization; qgrad8 adds QuanGrad's
# 8-bit all-reduce and int8 gradient buffer), the gradient-collective / policy-bytes probe, then
# table, pipeline memory model, figure and claims A1–A6 (methods/agoq/).
AG = f"{RESULTS}/{{scale}}/agoq"


wildcard_constraints:
    variant="[a-z0-9_]+",


rule agoq_data:
    """Corpus (train/val token ids) and the char tokenizer."""
    input:
        code=code("agoq", "data", "core.data", "core.tokenizer"),
    output:
        directory(f"{AG}/data"),
    log:
        f"{AG}/logs/data.log",
    benchmark:
        f"{AG}/benchmarks/agoq_data.tsv"
    params:
        cfg=lambda wc: as_json(ag(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.agoq data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule agoq_train:
    """One variant, data-parallel: the job launches world_size gloo processes itself."""
    input:
        data=f"{AG}/data",
        code=code("agoq", "run", "data", "laaq", "quant", "quangrad", "core.train", "core.models", "core.data"),
    output:
        directory(f"{AG}/runs/{{variant}}"),
    log:
        f"{AG}/logs/train/{{variant}}.log",
    benchmark:
        f"{AG}/benchmarks/agoq_train__{{variant}}.tsv"
    params:
        cfg=lambda wc: as_json(ag_run_cfg(wc.scale, wc.variant)),
    threads: 2
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        gpu=res("gpu"),
    shell:
        "python -m methods.agoq train --config {params.cfg:q} --data {input.data} --out {output} "
        "--threads {threads} > {log} 2>&1"


rule agoq_probe:
    """Gradient-collective errors over W simulated workers on the fp model; bytes of every policy."""
    input:
        model=f"{AG}/runs/fp",
        data=f"{AG}/data",
        code=code("agoq", "probe", "run", "data", "laaq", "quant", "quangrad", "core.models", "core.data"),
    output:
        f"{AG}/probe.json",
    log:
        f"{AG}/logs/probe.log",
    benchmark:
        f"{AG}/benchmarks/agoq_probe.tsv"
    params:
        cfg=lambda wc: as_json(ag_probe_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        gpu=res("gpu"),
    shell:
        "python -m methods.agoq probe --config {params.cfg:q} --model {input.model} --data {input.data} "
        "--out {output} --threads {threads} > {log} 2>&1"


rule agoq_aggregate:
    """Table, 1F1B stage-memory model, claim metrics (summary.json) and the figure."""
    input:
        runs=lambda wc: ag_runs(wc.scale),
        probe=f"{AG}/probe.json",
        code=code("agoq", "analysis", "pipeline", "core.plots"),
    output:
        table=f"{AG}/table.csv",
        pp_memory=f"{AG}/pp_memory.csv",
        summary=f"{AG}/summary.json",
        figure=report(
            f"{AG}/figures/agoq.png",
            caption="../report/agoq.rst",
            category="agoq",
            labels={"scale": "{scale}", "figure": "convergence, activation bytes, all-reduce error, stage memory"},
        ),
        caption=f"{AG}/figures/agoq.caption.txt",
    log:
        f"{AG}/logs/aggregate.log",
    benchmark:
        f"{AG}/benchmarks/agoq_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(ag(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.agoq aggregate --config {params.cfg:q} --runs {input.runs} --probe {input.probe} "
        "--table {output.table} --pp-memory {output.pp_memory} --summary {output.summary} "
        "--figure {output.figure} > {log} 2>&1"


FIGURES["agoq"] = lambda scale: [f"{RESULTS}/{scale}/agoq/figures/agoq.png"]
