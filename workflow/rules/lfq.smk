# LFQ (arXiv 2605.29756): a tiny Llama trained on PCFG + running-sum text, calibration windows,
# block-wise PTQ baselines (RTN, GPTQ, OmniQuant-LWC), the final block re-quantized with LFQ's
# soft cross-entropy (or the logit-MSE ablation), evaluation, table/figure and claims
# (methods/lfq/). Model dirs: models/fp → models/<base>-<wXgY> → models/<base>-<objective>-<wXgY>.
include: "helpers/lfq.smk"  # its config helpers and GPU job sizers


LFQ_DIR = f"{RESULTS}/{{scale}}/lfq"


rule lfq_data:
    """PCFG + running-sum corpus, calibration text, evaluation prompts and the char tokenizer."""
    input:
        code=code("lfq", "data"),
    output:
        directory(f"{LFQ_DIR}/data"),
    log:
        f"{LFQ_DIR}/logs/data.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "data")),
    shell:
        "python -m methods.lfq data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule lfq_train_fp:
    """The full-precision base model (paper scale: the hub model, copied)."""
    input:
        data=f"{LFQ_DIR}/data",
        code=code("lfq", "train"),
    output:
        directory(f"{LFQ_DIR}/models/fp"),
    log:
        f"{LFQ_DIR}/logs/train_fp.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_train_fp.tsv"
    resources:
        **sized(lfq_train_fp_job),
    params:
        runtime=runtime_of(lfq_train_fp_job),
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "base")),
    shell:
        "python -m methods.lfq train --config {params.cfg:q} --data {input.data:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_calibrate:
    """Calibration token windows (tiny: generated text; paper: WikiText-2 train)."""
    input:
        data=f"{LFQ_DIR}/data",
        base=f"{LFQ_DIR}/models/fp",
        code=code("lfq", "calibrate"),
    output:
        f"{LFQ_DIR}/calib.pt",
    log:
        f"{LFQ_DIR}/logs/calibrate.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_calibrate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "calib")),
    shell:
        "python -m methods.lfq calibrate --config {params.cfg:q} --data {input.data:q} "
        "--base {input.base:q} --out {output:q} > {log:q} 2>&1"


rule lfq_quantize:
    """A block-wise PTQ baseline over every block: fake-quantized model + packed weights."""
    input:
        base=f"{LFQ_DIR}/models/fp",
        calib=f"{LFQ_DIR}/calib.pt",
        code=code("lfq", "quantize"),
    output:
        directory(f"{LFQ_DIR}/models/{{method}}-{{qcfg}}"),
    log:
        f"{LFQ_DIR}/logs/quantize/{{method}}-{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_quantize__{{method}}-{{qcfg}}.tsv"
    wildcard_constraints:
        method="rtn|gptq|omni",
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_quantize_job),
    params:
        runtime=runtime_of(lfq_quantize_job),
        cfg=lambda wc: as_json(lfq_quant_cfg(wc.scale, wc.qcfg)),
    shell:
        "python -m methods.lfq quantize --config {params.cfg:q} --method {wildcards.method:q} "
        "--base {input.base:q} --calib {input.calib:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_final:
    """LFQ (or the +head logit-MSE ablation): the baseline's final block re-quantized."""
    input:
        base=f"{LFQ_DIR}/models/fp",
        quantized=f"{LFQ_DIR}/models/{{method}}-{{qcfg}}",
        calib=f"{LFQ_DIR}/calib.pt",
        code=code("lfq", "final"),
    output:
        directory(f"{LFQ_DIR}/models/{{method}}-{{objective}}-{{qcfg}}"),
    log:
        f"{LFQ_DIR}/logs/final/{{method}}-{{objective}}-{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_final__{{method}}-{{objective}}-{{qcfg}}.tsv"
    wildcard_constraints:
        method="rtn|gptq|omni",
        objective="headmse|lfq",
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_final_job),
    params:
        runtime=runtime_of(lfq_final_job),
        cfg=lambda wc: as_json(lfq_quant_cfg(wc.scale, wc.qcfg)),
    shell:
        "python -m methods.lfq final --config {params.cfg:q} --objective {wildcards.objective:q} "
        "--base {input.base:q} --quantized {input.quantized:q} --calib {input.calib:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_lm_eval_tasks:
    """The exported lm-eval task (smoke: the running sums) next to its data, which
    `lm_eval --include_path` reruns; an empty folder where lm-eval's registered tasks are used."""
    input:
        data=f"{LFQ_DIR}/data",
        base=f"{LFQ_DIR}/models/fp",
        code=code("lfq", "export-tasks"),
    output:
        directory(f"{LFQ_DIR}/lm_eval_tasks"),
    log:
        f"{LFQ_DIR}/logs/lm_eval_tasks.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_lm_eval_tasks.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "eval")),
    shell:
        "python -m methods.lfq export-tasks --config {params.cfg:q} --data {input.data:q} --base {input.base:q} "
        "--out {output:q} > {log:q} 2>&1"


rule lfq_evaluate:
    """PPL, KL to the FP logits, top-1 agreement, greedy EM by length (+ lm-eval) of one setting."""
    input:
        fp=f"{LFQ_DIR}/models/fp",
        models=lambda wc: lfq_models(wc.scale, wc.qcfg),
        data=f"{LFQ_DIR}/data",
        tasks=f"{LFQ_DIR}/lm_eval_tasks",
        code=code("lfq", "evaluate"),
    output:
        f"{LFQ_DIR}/eval/{{qcfg}}.json",
    log:
        f"{LFQ_DIR}/logs/evaluate/{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_evaluate__{{qcfg}}.tsv"
    wildcard_constraints:
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_evaluate_job),
    params:
        runtime=runtime_of(lfq_evaluate_job),
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "eval")),
    shell:
        "python -m methods.lfq evaluate --config {params.cfg:q} --fp {input.fp:q} --models {input.models:q} "
        "--data {input.data:q} --tasks {input.tasks:q} --setting {wildcards.qcfg:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_report:
    """Table, claim metrics (summary.json) and the EM-vs-length / KL figure."""
    input:
        evals=lambda wc: [f"{RESULTS}/{wc.scale}/lfq/eval/{s}.json" for s in lfq_settings(wc.scale)],
        code=code("lfq", "report"),
    output:
        table=f"{LFQ_DIR}/table.csv",
        summary=f"{LFQ_DIR}/summary.json",
        figure=report(
            f"{LFQ_DIR}/figures/em_vs_length.png",
            caption="../../methods/lfq/report.rst",
            category="lfq",
            labels={"scale": "{scale}", "figure": "EM vs output length and KL to FP"},
        ),
    log:
        f"{LFQ_DIR}/logs/report.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_report.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "analysis")),
    shell:
        "python -m methods.lfq report --config {params.cfg:q} --evals {input.evals:q} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["lfq"] = lambda scale: [f"{RESULTS}/{scale}/lfq/figures/em_vs_length.png"]
