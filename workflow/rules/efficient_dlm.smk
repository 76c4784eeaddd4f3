# Efficient-DLM (arXiv 2512.14067): tiny AR base → one masked-diffusion conversion per attention
# pattern / masking scheme → block-parallel decoding at several confidence thresholds (accuracy,
# tokens per forward, tokens/s vs AR) and weight drift → table, figures, claims (methods/efficient_dlm/).
ED = f"{RESULTS}/{{scale}}/efficient_dlm"


wildcard_constraints:
    variant="fullbidir|blk_noisy|blk_clean|blk_clean_posmask",


rule edlm_data:
    """Addition / string-reversal / PCFG corpus, held-out prompts and the char tokenizer."""
    input:
        code=code("efficient_dlm", "data"),
    output:
        directory(f"{ED}/data"),
    log:
        f"{ED}/logs/data.log",
    benchmark:
        f"{ED}/benchmarks/edlm_data.tsv"
    params:
        cfg=lambda wc: as_json(edlm(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.efficient_dlm data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule edlm_train_ar:
    """The AR base, trained with the shared trainer (paper scale: the hub base, saved as is)."""
    input:
        data=f"{ED}/data",
        code=code("efficient_dlm", "train_ar"),
    output:
        directory(f"{ED}/models/ar"),
    log:
        f"{ED}/logs/train_ar.log",
    benchmark:
        f"{ED}/benchmarks/edlm_train_ar.tsv"
    params:
        runtime=runtime_of(edlm_train_ar_job),
        cfg=lambda wc: as_json(edlm(wc.scale, "ar")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(edlm_train_ar_job),
    shell:
        "python -m methods.efficient_dlm train_ar --config {params.cfg:q} --data {input.data} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule edlm_convert:
    """Continuous pretraining of the AR base as a masked-diffusion LM, one variant."""
    input:
        ar=f"{ED}/models/ar",
        data=f"{ED}/data",
        code=code("efficient_dlm", "convert"),
    output:
        directory(f"{ED}/models/{{variant}}"),
    log:
        f"{ED}/logs/convert/{{variant}}.log",
    benchmark:
        f"{ED}/benchmarks/edlm_convert__{{variant}}.tsv"
    params:
        runtime=runtime_of(edlm_convert_job),
        cfg=lambda wc: as_json(edlm(wc.scale, "convert")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(edlm_convert_job),
    shell:
        "python -m methods.efficient_dlm convert --config {params.cfg:q} --variant {wildcards.variant} "
        "--ar {input.ar} --data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule edlm_eval:
    """Decode held-out prompts with the AR base and every variant at every threshold; drift."""
    input:
        ar=f"{ED}/models/ar",
        convs=lambda wc: edlm_convs(wc.scale),
        data=f"{ED}/data",
        code=code("efficient_dlm", "evaluate"),
    output:
        f"{ED}/eval.json",
    log:
        f"{ED}/logs/eval.log",
    benchmark:
        f"{ED}/benchmarks/edlm_eval.tsv"
    params:
        runtime=runtime_of(edlm_eval_job),
        cfg=lambda wc: as_json(edlm(wc.scale, "eval")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(edlm_eval_job),
    shell:
        "python -m methods.efficient_dlm evaluate --config {params.cfg:q} --ar {input.ar} "
        "--convs {input.convs} --data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule edlm_report:
    """Table, claim metrics (summary.json), accuracy–parallelism frontier and drift figures."""
    input:
        eval=f"{ED}/eval.json",
        code=code("efficient_dlm", "aggregate"),
    output:
        table=f"{ED}/table.csv",
        summary=f"{ED}/summary.json",
        frontier=report(
            f"{ED}/figures/acc_vs_tpf.png",
            caption="../report/efficient_dlm.rst",
            category="efficient_dlm",
            labels={"scale": "{scale}", "figure": "accuracy vs parallelism"},
        ),
        drift=report(
            f"{ED}/figures/drift.png",
            caption="../report/efficient_dlm.rst",
            category="efficient_dlm",
            labels={"scale": "{scale}", "figure": "weight drift"},
        ),
    log:
        f"{ED}/logs/report.log",
    benchmark:
        f"{ED}/benchmarks/edlm_report.tsv"
    params:
        cfg=lambda wc: as_json(edlm(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.efficient_dlm aggregate --config {params.cfg:q} --eval {input.eval} "
        "--table {output.table} --summary {output.summary} --frontier {output.frontier} "
        "--drift {output.drift} > {log} 2>&1"


FIGURES["efficient_dlm"] = lambda scale: [
    f"{RESULTS}/{scale}/efficient_dlm/figures/acc_vs_tpf.png",
    f"{RESULTS}/{scale}/efficient_dlm/figures/drift.png",
]
