# SiameseNorm (arXiv 2602.08064): the arithmetic + PCFG corpus, a training sweep over norm
# scheme × peak learning rate × seed, lm-eval arithmetic exact match, step time measured side
# by side, table, figure and claims C1–C5 (methods/siamesenorm/).
include: "helpers/siamesenorm.smk"  # its config helpers and GPU job sizers


SIAMESENORM_DIR = f"{RESULTS}/{{scale}}/siamesenorm"


rule siamesenorm_data:
    """Corpus (train/val text), held-out arithmetic prompts and the char tokenizer."""
    input:
        code=code("siamesenorm", "data"),
    output:
        directory(f"{SIAMESENORM_DIR}/data"),
    log:
        f"{SIAMESENORM_DIR}/logs/data.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "siamesenorm", "data")),
    shell:
        "python -m methods.siamesenorm data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule siamesenorm_shards:
    """train.txt and val.txt tokenized once into on-disk shards (train/, val/) that every run
    of the sweep reads by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{SIAMESENORM_DIR}/data",
        code=code("core", "shards"),
    output:
        directory(f"{SIAMESENORM_DIR}/shards"),
    log:
        f"{SIAMESENORM_DIR}/logs/shards.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_shards.tsv"
    params:
        # the files' newlines separate the documents already; without EOS the shards hold the
        # ids of the whole text, as when it was tokenized in one piece
        eos="no",
    shell:
        "python -m methods.core shards --source {input.data:q}/train.txt --val-source {input.data:q}/val.txt "
        "--tokenizer {input.data:q}/tokenizer --eos {params.eos} --out {output:q} > {log:q} 2>&1"


rule siamesenorm_train:
    """One run of the sweep; resumes from its checkpoint after a crash."""
    input:
        data=f"{SIAMESENORM_DIR}/data",
        shards=f"{SIAMESENORM_DIR}/shards",
        code=code("siamesenorm", "train"),
    output:
        directory(f"{SIAMESENORM_DIR}/runs/{{scheme}}_lr{{lr}}_s{{seed}}"),
    log:
        f"{SIAMESENORM_DIR}/logs/train/{{scheme}}_lr{{lr}}_s{{seed}}.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_train__{{scheme}}_lr{{lr}}_s{{seed}}.tsv"
    wildcard_constraints:
        scheme="pre|post|post_pre|hybrid_pre",
        lr=r"[0-9.]+(e-?[0-9]+)?",
    resources:
        **sized(siamesenorm_train_job),
    params:
        runtime=runtime_of(siamesenorm_train_job),
        cfg=lambda wc: as_json(hp(wc.scale, "siamesenorm", "run")),
        ckpt=f"{SIAMESENORM_DIR}/checkpoints/{{scheme}}_lr{{lr}}_s{{seed}}.pt",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    shell:
        "{params.launch} -m methods.siamesenorm train --config {params.cfg:q} --scheme {wildcards.scheme:q} "
        "--lr {wildcards.lr:q} --seed {wildcards.seed:q} --data {input.data:q} --shards {input.shards:q} "
        "--checkpoint {params.ckpt:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule siamesenorm_steptime:
    """Training-step time of every scheme, interleaved in one process (C4)."""
    input:
        code=code("siamesenorm", "steptime"),
    output:
        f"{SIAMESENORM_DIR}/steptime.json",
    log:
        f"{SIAMESENORM_DIR}/logs/steptime.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_steptime.tsv"
    resources:
        **sized(siamesenorm_steptime_job),
    params:
        runtime=runtime_of(siamesenorm_steptime_job),
        cfg=lambda wc: as_json(siamesenorm_steptime_cfg(wc.scale)),
    shell:
        "python -m methods.siamesenorm steptime --config {params.cfg:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule siamesenorm_evaluate:
    """Arithmetic exact match of every run through lm-eval (paper scale: lm-eval's tasks)."""
    input:
        runs=lambda wc: siamesenorm_runs(wc.scale),
        data=f"{SIAMESENORM_DIR}/data",
        code=code("siamesenorm", "evaluate"),
    output:
        eval=f"{SIAMESENORM_DIR}/eval.json",
        # the task YAMLs next to their data: `lm_eval --include_path` on it reruns the evaluation
        tasks=directory(f"{SIAMESENORM_DIR}/lm_eval_tasks"),
    log:
        f"{SIAMESENORM_DIR}/logs/evaluate.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_evaluate.tsv"
    resources:
        **sized(siamesenorm_evaluate_job),
    params:
        runtime=runtime_of(siamesenorm_evaluate_job),
        cfg=lambda wc: as_json(hp(wc.scale, "siamesenorm", "eval")),
    shell:
        "python -m methods.siamesenorm evaluate --config {params.cfg:q} --runs {input.runs:q} "
        "--data {input.data:q} --out {output.eval:q} --tasks-out {output.tasks:q} --threads {threads} "
        "--runtime {params.runtime:q} > {log:q} 2>&1"


rule siamesenorm_aggregate:
    """Table, the claim metrics (summary.json) and the loss-curve figure."""
    input:
        runs=lambda wc: siamesenorm_runs(wc.scale),
        eval=f"{SIAMESENORM_DIR}/eval.json",
        steptime=f"{SIAMESENORM_DIR}/steptime.json",
        code=code("siamesenorm", "aggregate"),
    output:
        table=f"{SIAMESENORM_DIR}/table.csv",
        summary=f"{SIAMESENORM_DIR}/summary.json",
        figure=report(
            f"{SIAMESENORM_DIR}/figures/loss_curves.png",
            caption="../../methods/siamesenorm/report.rst",
            category="siamesenorm",
            labels={"scale": "{scale}", "figure": "loss curves and gradient norms"},
        ),
        caption=f"{SIAMESENORM_DIR}/figures/loss_curves.caption.txt",
    log:
        f"{SIAMESENORM_DIR}/logs/aggregate.log",
    benchmark:
        f"{SIAMESENORM_DIR}/benchmarks/siamesenorm_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "siamesenorm", "analysis")),
    shell:
        "python -m methods.siamesenorm aggregate --config {params.cfg:q} --runs {input.runs:q} "
        "--eval {input.eval:q} --steptime {input.steptime:q} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["siamesenorm"] = lambda scale: [f"{RESULTS}/{scale}/siamesenorm/figures/loss_curves.png"]
