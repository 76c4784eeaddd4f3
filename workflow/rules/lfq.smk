# LFQ (arXiv 2605.29756): a tiny Llama trained on PCFG + running-sum text, calibration windows,
# block-wise PTQ baselines (RTN, GPTQ, OmniQuant-LWC), the final block re-quantized with LFQ's
# soft cross-entropy (or the logit-MSE ablation), evaluation, table/figure and claims
# (methods/lfq/), per quantization seed s<k> (the claims' replicates). Model dirs: models/fp →
# models/s<k>/<base>-<wXgY> → models/s<k>/<base>-<objective>-<wXgY>; eval/s<k>/<wXgY>.json.
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
    """One quantization seed's calibration token windows (tiny: generated text; paper: WikiText-2 train)."""
    input:
        data=f"{LFQ_DIR}/data",
        base=f"{LFQ_DIR}/models/fp",
        code=code("lfq", "calibrate"),
    output:
        f"{LFQ_DIR}/calib/{{seed}}.pt",
    log:
        f"{LFQ_DIR}/logs/calibrate/{{seed}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_calibrate__{{seed}}.tsv"
    wildcard_constraints:
        seed=r"s\d+",
    params:
        cfg=lambda wc: as_json(lfq_calib_cfg(wc.scale, wc.seed)),
    shell:
        "python -m methods.lfq calibrate --config {params.cfg:q} --data {input.data:q} "
        "--base {input.base:q} --out {output:q} > {log:q} 2>&1"


rule lfq_quantize:
    """Every block-wise PTQ baseline of one seed and setting, in one process (the FP model loaded
    once): per baseline, its fake-quantized model + packed weights in its own directory."""
    input:
        base=f"{LFQ_DIR}/models/fp",
        calib=f"{LFQ_DIR}/calib/{{seed}}.pt",
        code=code("lfq", "quantize"),
    output:
        [directory(f"{LFQ_DIR}/models/{{seed}}/{m}-{{qcfg}}") for m in LFQ_BASELINES],
    log:
        f"{LFQ_DIR}/logs/quantize/{{seed}}-{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_quantize__{{seed}}-{{qcfg}}.tsv"
    wildcard_constraints:
        seed=r"s\d+",
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_quantize_job),
    params:
        runtime=runtime_of(lfq_quantize_job),
        cfg=lambda wc: as_json(lfq_quant_cfg(wc.scale, wc.qcfg, wc.seed)),
        methods=shell_words(LFQ_BASELINES),
    shell:
        "python -m methods.lfq quantize --config {params.cfg:q} --methods {params.methods} "
        "--base {input.base:q} --calib {input.calib:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_final:
    """LFQ (and the +head logit-MSE ablation) of one seed and setting, in one process: each
    variant's baseline with its final block re-quantized, in its own directory."""
    input:
        base=f"{LFQ_DIR}/models/fp",
        quantized=lambda wc: lfq_final_bases(wc, unique=True),
        calib=f"{LFQ_DIR}/calib/{{seed}}.pt",
        code=code("lfq", "final"),
    output:
        [directory(f"{LFQ_DIR}/models/{{seed}}/{v}-{{qcfg}}") for v in LFQ_FINALS],
    log:
        f"{LFQ_DIR}/logs/final/{{seed}}-{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_final__{{seed}}-{{qcfg}}.tsv"
    wildcard_constraints:
        seed=r"s\d+",
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_final_job),
    params:
        runtime=runtime_of(lfq_final_job),
        cfg=lambda wc: as_json(lfq_quant_cfg(wc.scale, wc.qcfg, wc.seed)),
        objectives=shell_words([v.split("-")[1] for v in LFQ_FINALS]),
        bases=lambda wc: shell_words(lfq_final_bases(wc)),
    shell:
        "python -m methods.lfq final --config {params.cfg:q} --objectives {params.objectives} "
        "--base {input.base:q} --quantized {params.bases} --calib {input.calib:q} --out {output:q} "
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
        models=lambda wc: lfq_models(wc.scale, wc.seed, wc.qcfg),
        data=f"{LFQ_DIR}/data",
        tasks=f"{LFQ_DIR}/lm_eval_tasks",
        code=code("lfq", "evaluate"),
    output:
        f"{LFQ_DIR}/eval/{{seed}}/{{qcfg}}.json",
    log:
        f"{LFQ_DIR}/logs/evaluate/{{seed}}-{{qcfg}}.log",
    benchmark:
        f"{LFQ_DIR}/benchmarks/lfq_evaluate__{{seed}}-{{qcfg}}.tsv"
    wildcard_constraints:
        seed=r"s\d+",
        qcfg=r"w\d+g\d+",
    resources:
        **sized(lfq_evaluate_job),
    params:
        runtime=runtime_of(lfq_evaluate_job),
        cfg=lambda wc: as_json(hp(wc.scale, "lfq", "eval")),
        seed=lambda wc: lfq_seed_number(wc.seed),
    shell:
        "python -m methods.lfq evaluate --config {params.cfg:q} --fp {input.fp:q} --models {input.models:q} "
        "--data {input.data:q} --tasks {input.tasks:q} --setting {wildcards.qcfg:q} --seed {params.seed} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule lfq_report:
    """Table, claim metrics (summary.json) and the EM-vs-length / KL figure."""
    input:
        evals=lambda wc: lfq_evals(wc.scale),
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
