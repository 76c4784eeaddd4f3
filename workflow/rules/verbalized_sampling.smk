# Verbalized Sampling (arXiv 2510.01171): synthetic world with planted typicality alpha ->
# alpha estimator + tabular sharpening -> tiny base LM -> DPO -> sampling with each prompting
# method through the LLM backend layer -> metrics, SimBackend threshold sweep, figure, claims
# C1-C5 (methods/verbalized_sampling/).
VSD = f"{RESULTS}/{{scale}}/verbalized_sampling"


wildcard_constraints:
    vsmodel="base|aligned",


rule vs_synth:
    """World (pool, pi_ref, r_true) and preference pairs with the planted alpha."""
    input:
        code=code("verbalized_sampling", "synth"),
    output:
        directory(f"{VSD}/data"),
    log:
        f"{VSD}/logs/synth.log",
    benchmark:
        f"{VSD}/benchmarks/vs_synth.tsv"
    params:
        cfg=lambda wc: as_json(vs(wc.scale, "world")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.verbalized_sampling synth --config {params.cfg:q} --out {output} > {log} 2>&1"


rule vs_theory:
    """alpha-hat with cluster-robust SE; closed-form and tabular-DPO sharpening slopes."""
    input:
        data=f"{VSD}/data",
        code=code("verbalized_sampling", "theory"),
    output:
        f"{VSD}/theory.json",
    log:
        f"{VSD}/logs/theory.log",
    benchmark:
        f"{VSD}/benchmarks/vs_theory.tsv"
    params:
        cfg=lambda wc: as_json(vs(wc.scale, "theory")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.verbalized_sampling theory --config {params.cfg:q} --data {input.data} "
        "--out {output} > {log} 2>&1"


rule vs_pretrain:
    """The tiny base LM on the direct / sequence / VS formats."""
    input:
        data=f"{VSD}/data",
        code=code("verbalized_sampling", "pretrain"),
    output:
        directory(f"{VSD}/models/base"),
    log:
        f"{VSD}/logs/pretrain.log",
    benchmark:
        f"{VSD}/benchmarks/vs_pretrain.tsv"
    params:
        runtime=runtime_of(vs_pretrain_job),
        cfg=lambda wc: as_json(vs(wc.scale, "pretrain")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(vs_pretrain_job),
    shell:
        "python -m methods.verbalized_sampling pretrain --config {params.cfg:q} --data {input.data} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule vs_dpo:
    """DPO of the base LM on the preference pairs (direct format)."""
    input:
        data=f"{VSD}/data",
        base=f"{VSD}/models/base",
        code=code("verbalized_sampling", "dpo"),
    output:
        directory(f"{VSD}/models/aligned"),
    log:
        f"{VSD}/logs/dpo.log",
    benchmark:
        f"{VSD}/benchmarks/vs_dpo.tsv"
    params:
        runtime=runtime_of(vs_dpo_job),
        cfg=lambda wc: as_json(vs(wc.scale, "dpo")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(vs_dpo_job),
    shell:
        "python -m methods.verbalized_sampling dpo --config {params.cfg:q} --data {input.data} "
        "--base {input.base} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule vs_sample:
    """Samples of every prompting method from one model, through the backend layer."""
    input:
        data=f"{VSD}/data",
        model=f"{VSD}/models/{{vsmodel}}",
        code=code("verbalized_sampling", "sample"),
    output:
        f"{VSD}/samples/{{vsmodel}}.json",
    log:
        f"{VSD}/logs/sample_{{vsmodel}}.log",
    benchmark:
        f"{VSD}/benchmarks/vs_sample__{{vsmodel}}.tsv"
    params:
        runtime=runtime_of(vs_sample_job),
        cfg=lambda wc: as_json(vs_sample_cfg(wc.scale, wc.vsmodel)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(vs_sample_job),
    shell:
        "python -m methods.verbalized_sampling sample --config {params.cfg:q} --data {input.data} "
        "--model {input.model} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule vs_analyze:
    """Metrics table, SimBackend threshold sweep (C5), claim metrics and the figure."""
    input:
        data=f"{VSD}/data",
        theory=f"{VSD}/theory.json",
        base=f"{VSD}/samples/base.json",
        aligned=f"{VSD}/samples/aligned.json",
        code=code("verbalized_sampling", "analyze"),
    output:
        table=f"{VSD}/metrics.json",
        summary=f"{VSD}/summary.json",
        figure=report(
            f"{VSD}/figures/vs_diversity.png",
            caption="../report/verbalized_sampling.rst",
            category="verbalized_sampling",
            labels={"scale": "{scale}", "figure": "sharpening, diversity, coverage"},
        ),
        caption=f"{VSD}/figures/vs_diversity.caption.txt",
    log:
        f"{VSD}/logs/analyze.log",
    benchmark:
        f"{VSD}/benchmarks/vs_analyze.tsv"
    params:
        cfg=lambda wc: as_json(vs(wc.scale, "analysis")),
        beta=lambda wc: vs(wc.scale, "dpo", "beta"),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.verbalized_sampling analyze --config {params.cfg:q} --data {input.data} "
        "--theory {input.theory} --base {input.base} --aligned {input.aligned} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} --dpo-beta {params.beta} > {log} 2>&1"


FIGURES["verbalized_sampling"] = lambda scale: [f"{RESULTS}/{scale}/verbalized_sampling/figures/vs_diversity.png"]
