# LFQ (arXiv 2605.29756): a tiny Llama trained on PCFG + running-sum text, calibration windows,
# block-wise PTQ baselines (RTN, GPTQ, OmniQuant-LWC), the final block re-quantized with LFQ's
# soft cross-entropy (or the logit-MSE ablation), evaluation, table/figure and claims
# (methods/lfq/). Model dirs: models/fp → models/<base>-<wXgY> → models/<base>-<objective>-<wXgY>.
LQ = f"{RESULTS}/{{scale}}/lfq"


wildcard_constraints:
    method="rtn|gptq|omni",
    objective="headmse|lfq",
    qcfg=r"w\d+g\d+",


rule lfq_data:
    """PCFG + running-sum corpus, calibration text, evaluation prompts and the char tokenizer."""
    input:
        code=code("lfq", "data"),
    output:
        directory(f"{LQ}/data"),
    log:
        f"{LQ}/logs/data.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_data.tsv"
    params:
        cfg=lambda wc: as_json(lq(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.lfq data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule lfq_train_fp:
    """The full-precision base model (paper scale: the hub model, copied)."""
    input:
        data=f"{LQ}/data",
        code=code("lfq", "train"),
    output:
        directory(f"{LQ}/models/fp"),
    log:
        f"{LQ}/logs/train_fp.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_train_fp.tsv"
    params:
        runtime=runtime_of(lfq_train_fp_job),
        cfg=lambda wc: as_json(lq(wc.scale, "base")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(lfq_train_fp_job),
    shell:
        "python -m methods.lfq train --config {params.cfg:q} --data {input.data} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule lfq_calibrate:
    """Calibration token windows (tiny: generated text; paper: WikiText-2 train)."""
    input:
        data=f"{LQ}/data",
        base=f"{LQ}/models/fp",
        code=code("lfq", "calibrate"),
    output:
        f"{LQ}/calib.pt",
    log:
        f"{LQ}/logs/calibrate.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_calibrate.tsv"
    params:
        cfg=lambda wc: as_json(lq(wc.scale, "calib")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.lfq calibrate --config {params.cfg:q} --data {input.data} "
        "--base {input.base} --out {output} > {log} 2>&1"


rule lfq_quantize:
    """A block-wise PTQ baseline over every block: fake-quantized model + packed weights."""
    input:
        base=f"{LQ}/models/fp",
        calib=f"{LQ}/calib.pt",
        code=code("lfq", "quantize"),
    output:
        directory(f"{LQ}/models/{{method}}-{{qcfg}}"),
    log:
        f"{LQ}/logs/quantize/{{method}}-{{qcfg}}.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_quantize__{{method}}-{{qcfg}}.tsv"
    params:
        runtime=runtime_of(lfq_quantize_job),
        cfg=lambda wc: as_json(lq_quant_cfg(wc.scale, wc.qcfg)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(lfq_quantize_job),
    shell:
        "python -m methods.lfq quantize --config {params.cfg:q} --method {wildcards.method} "
        "--base {input.base} --calib {input.calib} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule lfq_final:
    """LFQ (or the +head logit-MSE ablation): the baseline's final block re-quantized."""
    input:
        base=f"{LQ}/models/fp",
        quantized=f"{LQ}/models/{{method}}-{{qcfg}}",
        calib=f"{LQ}/calib.pt",
        code=code("lfq", "final"),
    output:
        directory(f"{LQ}/models/{{method}}-{{objective}}-{{qcfg}}"),
    log:
        f"{LQ}/logs/final/{{method}}-{{objective}}-{{qcfg}}.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_final__{{method}}-{{objective}}-{{qcfg}}.tsv"
    params:
        runtime=runtime_of(lfq_final_job),
        cfg=lambda wc: as_json(lq_quant_cfg(wc.scale, wc.qcfg)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(lfq_final_job),
    shell:
        "python -m methods.lfq final --config {params.cfg:q} --objective {wildcards.objective} "
        "--base {input.base} --quantized {input.quantized} --calib {input.calib} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule lfq_evaluate:
    """PPL, KL to the FP logits, top-1 agreement, greedy EM by length (+ lm-eval) of one setting."""
    input:
        fp=f"{LQ}/models/fp",
        models=lambda wc: lq_models(wc.scale, wc.qcfg),
        data=f"{LQ}/data",
        code=code("lfq", "evaluate"),
    output:
        f"{LQ}/eval/{{qcfg}}.json",
    log:
        f"{LQ}/logs/evaluate/{{qcfg}}.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_evaluate__{{qcfg}}.tsv"
    params:
        runtime=runtime_of(lfq_evaluate_job),
        cfg=lambda wc: as_json(lq(wc.scale, "eval")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(lfq_evaluate_job),
    shell:
        "python -m methods.lfq evaluate --config {params.cfg:q} --fp {input.fp} --models {input.models} "
        "--data {input.data} --setting {wildcards.qcfg} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule lfq_report:
    """Table, claim metrics (summary.json) and the EM-vs-length / KL figure."""
    input:
        evals=lambda wc: [f"{RESULTS}/{wc.scale}/lfq/eval/{s}.json" for s in lq_settings(wc.scale)],
        code=code("lfq", "report"),
    output:
        table=f"{LQ}/table.csv",
        summary=f"{LQ}/summary.json",
        figure=report(
            f"{LQ}/figures/em_vs_length.png",
            caption="../report/lfq.rst",
            category="lfq",
            labels={"scale": "{scale}", "figure": "EM vs output length and KL to FP"},
        ),
    log:
        f"{LQ}/logs/report.log",
    benchmark:
        f"{LQ}/benchmarks/lfq_report.tsv"
    params:
        cfg=lambda wc: as_json(lq(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.lfq report --config {params.cfg:q} --evals {input.evals} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["lfq"] = lambda scale: [f"{RESULTS}/{scale}/lfq/figures/em_vs_length.png"]
