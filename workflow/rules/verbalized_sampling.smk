# Verbalized Sampling (arXiv 2510.01171): synthetic world with planted typicality alpha ->
# alpha estimator + tabular sharpening -> tiny base LM -> DPO -> sampling with each prompting
# method through the LLM backend layer -> metrics, SimBackend threshold sweep, figure, claims
# C1-C5 (methods/verbalized_sampling/).
include: "helpers/verbalized_sampling.smk"  # its config helpers and GPU job sizers


VERBALIZED_SAMPLING_DIR = f"{RESULTS}/{{scale}}/verbalized_sampling"


rule verbalized_sampling_synth:
    """World (pool, pi_ref, r_true) and preference pairs with the planted alpha."""
    input:
        code=code("verbalized_sampling", "synth"),
    output:
        directory(f"{VERBALIZED_SAMPLING_DIR}/data"),
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/synth.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_synth.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "verbalized_sampling", "world")),
    shell:
        "python -m methods.verbalized_sampling synth --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule verbalized_sampling_theory:
    """alpha-hat with cluster-robust SE; closed-form and tabular-DPO sharpening slopes."""
    input:
        data=f"{VERBALIZED_SAMPLING_DIR}/data",
        code=code("verbalized_sampling", "theory"),
    output:
        f"{VERBALIZED_SAMPLING_DIR}/theory.json",
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/theory.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_theory.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "verbalized_sampling", "theory")),
    shell:
        "python -m methods.verbalized_sampling theory --config {params.cfg:q} --data {input.data:q} "
        "--out {output:q} > {log:q} 2>&1"


rule verbalized_sampling_pretrain:
    """The tiny base LM on the direct / sequence / VS formats."""
    input:
        data=f"{VERBALIZED_SAMPLING_DIR}/data",
        code=code("verbalized_sampling", "pretrain"),
    output:
        directory(f"{VERBALIZED_SAMPLING_DIR}/models/base"),
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/pretrain.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_pretrain.tsv"
    resources:
        **sized(verbalized_sampling_pretrain_job),
    params:
        runtime=runtime_of(verbalized_sampling_pretrain_job),
        cfg=lambda wc: as_json(hp(wc.scale, "verbalized_sampling", "pretrain")),
    shell:
        "python -m methods.verbalized_sampling pretrain --config {params.cfg:q} --data {input.data:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule verbalized_sampling_dpo:
    """DPO of the base LM on the preference pairs (direct format)."""
    input:
        data=f"{VERBALIZED_SAMPLING_DIR}/data",
        base=f"{VERBALIZED_SAMPLING_DIR}/models/base",
        code=code("verbalized_sampling", "dpo"),
    output:
        directory(f"{VERBALIZED_SAMPLING_DIR}/models/aligned"),
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/dpo.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_dpo.tsv"
    resources:
        **sized(verbalized_sampling_dpo_job),
    params:
        runtime=runtime_of(verbalized_sampling_dpo_job),
        cfg=lambda wc: as_json(hp(wc.scale, "verbalized_sampling", "dpo")),
    shell:
        "python -m methods.verbalized_sampling dpo --config {params.cfg:q} --data {input.data:q} "
        "--base {input.base:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule verbalized_sampling_sample:
    """Samples of every prompting method from one model, through the backend layer."""
    input:
        data=f"{VERBALIZED_SAMPLING_DIR}/data",
        model=lambda wc: verbalized_sampling_tiny_model(wc.scale, wc.vsmodel),
        served=lambda wc: verbalized_sampling_served(wc.scale, wc.vsmodel),
        code=code("verbalized_sampling", "sample"),
    output:
        f"{VERBALIZED_SAMPLING_DIR}/samples/{{vsmodel}}.json",
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/sample_{{vsmodel}}.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_sample__{{vsmodel}}.tsv"
    wildcard_constraints:
        vsmodel="base|aligned",
    threads: client_threads(lambda wc: verbalized_sampling_served(wc.scale, wc.vsmodel))
    resources:
        **sized(verbalized_sampling_sample_job),
    params:
        runtime=runtime_of(verbalized_sampling_sample_job),
        cfg=lambda wc: as_json(verbalized_sampling_sample_cfg(wc.scale, wc.vsmodel)),
        model=lambda wc, input: verbalized_sampling_model_arg(input.model),
    shell:
        "python -m methods.verbalized_sampling sample --config {params.cfg:q} --data {input.data:q} "
        "{params.model} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule verbalized_sampling_analyze:
    """Metrics table, SimBackend threshold sweep (C5), claim metrics and the figure."""
    input:
        data=f"{VERBALIZED_SAMPLING_DIR}/data",
        theory=f"{VERBALIZED_SAMPLING_DIR}/theory.json",
        base=f"{VERBALIZED_SAMPLING_DIR}/samples/base.json",
        aligned=f"{VERBALIZED_SAMPLING_DIR}/samples/aligned.json",
        code=code("verbalized_sampling", "analyze"),
    output:
        table=f"{VERBALIZED_SAMPLING_DIR}/metrics.json",
        summary=f"{VERBALIZED_SAMPLING_DIR}/summary.json",
        figure=report(
            f"{VERBALIZED_SAMPLING_DIR}/figures/vs_diversity.png",
            caption="../../methods/verbalized_sampling/report.rst",
            category="verbalized_sampling",
            labels={"scale": "{scale}", "figure": "sharpening, diversity, coverage"},
        ),
        caption=f"{VERBALIZED_SAMPLING_DIR}/figures/vs_diversity.caption.txt",
    log:
        f"{VERBALIZED_SAMPLING_DIR}/logs/analyze.log",
    benchmark:
        f"{VERBALIZED_SAMPLING_DIR}/benchmarks/verbalized_sampling_analyze.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "verbalized_sampling", "analysis")),
        beta=lambda wc: hp(wc.scale, "verbalized_sampling", "dpo", "beta"),
    shell:
        "python -m methods.verbalized_sampling analyze --config {params.cfg:q} --data {input.data:q} "
        "--theory {input.theory:q} --base {input.base:q} --aligned {input.aligned:q} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} --dpo-beta {params.beta} > {log:q} 2>&1"


FIGURES["verbalized_sampling"] = lambda scale: [f"{RESULTS}/{scale}/verbalized_sampling/figures/vs_diversity.png"]
