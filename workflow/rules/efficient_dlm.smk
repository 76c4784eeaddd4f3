# Efficient-DLM (arXiv 2512.14067): tiny AR base → one masked-diffusion conversion per attention
# pattern / masking scheme and seed → block-parallel decoding at several confidence thresholds (accuracy,
# tokens per forward, tokens/s vs AR) and weight drift → table, figures, claims (methods/efficient_dlm/).
include: "helpers/efficient_dlm.smk"  # its config helpers and GPU job sizers


EFFICIENT_DLM_DIR = f"{RESULTS}/{{scale}}/efficient_dlm"


rule efficient_dlm_data:
    """Addition / string-reversal / PCFG corpus, held-out prompts and the char tokenizer."""
    input:
        code=code("efficient_dlm", "data"),
    output:
        directory(f"{EFFICIENT_DLM_DIR}/data"),
    log:
        f"{EFFICIENT_DLM_DIR}/logs/data.log",
    benchmark:
        f"{EFFICIENT_DLM_DIR}/benchmarks/efficient_dlm_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "efficient_dlm", "data")),
        extra=lambda wc: efficient_dlm_data_args(wc.scale),
    shell:
        "python -m methods.efficient_dlm data --config {params.cfg:q} --out {output:q} {params.extra} > {log:q} 2>&1"


rule efficient_dlm_train_ar:
    """The AR base, trained with the shared trainer (paper scale: the hub base, saved as is)."""
    input:
        data=f"{EFFICIENT_DLM_DIR}/data",
        code=code("efficient_dlm", "train_ar"),
    output:
        directory(f"{EFFICIENT_DLM_DIR}/models/ar"),
    log:
        f"{EFFICIENT_DLM_DIR}/logs/train_ar.log",
    benchmark:
        f"{EFFICIENT_DLM_DIR}/benchmarks/efficient_dlm_train_ar.tsv"
    resources:
        **sized(efficient_dlm_train_ar_job),
    params:
        runtime=runtime_of(efficient_dlm_train_ar_job),
        cfg=lambda wc: as_json(hp(wc.scale, "efficient_dlm", "ar")),
    shell:
        "python -m methods.efficient_dlm train_ar --config {params.cfg:q} --data {input.data:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule efficient_dlm_convert:
    """Continuous pretraining of the AR base as a masked-diffusion LM, one variant and seed."""
    input:
        ar=f"{EFFICIENT_DLM_DIR}/models/ar",
        data=f"{EFFICIENT_DLM_DIR}/data",
        code=code("efficient_dlm", "convert"),
    output:
        directory(f"{EFFICIENT_DLM_DIR}/models/{{variant}}_s{{seed}}"),
    log:
        f"{EFFICIENT_DLM_DIR}/logs/convert/{{variant}}_s{{seed}}.log",
    benchmark:
        f"{EFFICIENT_DLM_DIR}/benchmarks/efficient_dlm_convert__{{variant}}_s{{seed}}.tsv"
    wildcard_constraints:
        variant="fullbidir|blk_noisy|blk_clean|blk_clean_posmask",
        seed=r"\d+",
    resources:
        **sized(efficient_dlm_convert_job),
    params:
        runtime=runtime_of(efficient_dlm_convert_job),
        cfg=lambda wc: as_json(efficient_dlm_convert_cfg(wc.scale, wc.seed)),
    shell:
        "python -m methods.efficient_dlm convert --config {params.cfg:q} --variant {wildcards.variant:q} "
        "--ar {input.ar:q} --data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule efficient_dlm_eval:
    """Decode held-out prompts with the AR base and every variant at every threshold; drift."""
    input:
        ar=f"{EFFICIENT_DLM_DIR}/models/ar",
        convs=lambda wc: efficient_dlm_conversions(wc.scale),
        data=f"{EFFICIENT_DLM_DIR}/data",
        code=code("efficient_dlm", "evaluate"),
    output:
        f"{EFFICIENT_DLM_DIR}/eval.json",
    log:
        f"{EFFICIENT_DLM_DIR}/logs/eval.log",
    benchmark:
        f"{EFFICIENT_DLM_DIR}/benchmarks/efficient_dlm_eval.tsv"
    resources:
        **sized(efficient_dlm_eval_job),
    params:
        runtime=runtime_of(efficient_dlm_eval_job),
        cfg=lambda wc: as_json(hp(wc.scale, "efficient_dlm", "eval")),
        hub=lambda wc: as_json(efficient_dlm_hub(wc.scale)),
    shell:
        "python -m methods.efficient_dlm evaluate --config {params.cfg:q} --hub {params.hub:q} --ar {input.ar:q} "
        "--convs {input.convs:q} --data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule efficient_dlm_report:
    """Table, claim metrics (summary.json), accuracy–parallelism frontier and drift figures."""
    input:
        eval=f"{EFFICIENT_DLM_DIR}/eval.json",
        code=code("efficient_dlm", "aggregate"),
    output:
        table=f"{EFFICIENT_DLM_DIR}/table.csv",
        summary=f"{EFFICIENT_DLM_DIR}/summary.json",
        frontier=report(
            f"{EFFICIENT_DLM_DIR}/figures/acc_vs_tpf.png",
            caption="../../methods/efficient_dlm/report.rst",
            category="efficient_dlm",
            labels={"scale": "{scale}", "figure": "accuracy vs parallelism"},
        ),
        drift=report(
            f"{EFFICIENT_DLM_DIR}/figures/drift.png",
            caption="../../methods/efficient_dlm/report.rst",
            category="efficient_dlm",
            labels={"scale": "{scale}", "figure": "weight drift"},
        ),
    log:
        f"{EFFICIENT_DLM_DIR}/logs/report.log",
    benchmark:
        f"{EFFICIENT_DLM_DIR}/benchmarks/efficient_dlm_report.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "efficient_dlm", "analysis")),
    shell:
        "python -m methods.efficient_dlm aggregate --config {params.cfg:q} --eval {input.eval:q} "
        "--table {output.table:q} --summary {output.summary:q} --frontier {output.frontier:q} "
        "--drift {output.drift:q} > {log:q} 2>&1"


FIGURES["efficient_dlm"] = lambda scale: [
    f"{RESULTS}/{scale}/efficient_dlm/figures/acc_vs_tpf.png",
    f"{RESULTS}/{scale}/efficient_dlm/figures/drift.png",
]
