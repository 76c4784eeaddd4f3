# SiameseNorm (arXiv 2602.08064): the arithmetic + PCFG corpus, a training sweep over norm
# scheme × peak learning rate × seed, lm-eval arithmetic exact match, step time measured side
# by side, table, figure and claims C1–C5 (methods/siamesenorm/).
SN = f"{RESULTS}/{{scale}}/siamesenorm"


wildcard_constraints:
    scheme="pre|post|post_pre|hybrid_pre",
    lr=r"[0-9.]+(e-?[0-9]+)?",


rule sn_data:
    """Corpus (train/val text), held-out arithmetic prompts and the char tokenizer."""
    input:
        code=code("siamesenorm", "data"),
    output:
        directory(f"{SN}/data"),
    log:
        f"{SN}/logs/data.log",
    benchmark:
        f"{SN}/benchmarks/sn_data.tsv"
    params:
        cfg=lambda wc: as_json(sn(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.siamesenorm data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule sn_shards:
    """train.txt and val.txt tokenized once into on-disk shards (train/, val/) that every run
    of the sweep reads by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{SN}/data",
        code=code("core", "shards"),
    output:
        directory(f"{SN}/shards"),
    log:
        f"{SN}/logs/shards.log",
    benchmark:
        f"{SN}/benchmarks/sn_shards.tsv"
    params:
        # the files' newlines separate the documents already; without EOS the shards hold the
        # ids of the whole text, as when it was tokenized in one piece
        eos="no",
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.core shards --source {input.data}/train.txt --val-source {input.data}/val.txt "
        "--tokenizer {input.data}/tokenizer --eos {params.eos} --out {output} > {log} 2>&1"


rule sn_train:
    """One run of the sweep; resumes from its checkpoint after a crash."""
    input:
        data=f"{SN}/data",
        shards=f"{SN}/shards",
        code=code("siamesenorm", "train"),
    output:
        directory(f"{SN}/runs/{{scheme}}_lr{{lr}}_s{{seed}}"),
    log:
        f"{SN}/logs/train/{{scheme}}_lr{{lr}}_s{{seed}}.log",
    benchmark:
        f"{SN}/benchmarks/sn_train__{{scheme}}_lr{{lr}}_s{{seed}}.tsv"
    params:
        runtime=runtime_of(sn_train_job),
        cfg=lambda wc: as_json(sn(wc.scale, "run")),
        ckpt=f"{SN}/checkpoints/{{scheme}}_lr{{lr}}_s{{seed}}.pt",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    threads: 1
    conda:
        conda_env
    resources:
        **sized(sn_train_job),
    shell:
        "{params.launch} -m methods.siamesenorm train --config {params.cfg:q} --scheme {wildcards.scheme} "
        "--lr {wildcards.lr} --seed {wildcards.seed} --data {input.data} --shards {input.shards} "
        "--checkpoint {params.ckpt} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sn_steptime:
    """Training-step time of every scheme, interleaved in one process (C4)."""
    input:
        code=code("siamesenorm", "steptime"),
    output:
        f"{SN}/steptime.json",
    log:
        f"{SN}/logs/steptime.log",
    benchmark:
        f"{SN}/benchmarks/sn_steptime.tsv"
    params:
        runtime=runtime_of(sn_steptime_job),
        cfg=lambda wc: as_json(sn_steptime_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(sn_steptime_job),
    shell:
        "python -m methods.siamesenorm steptime --config {params.cfg:q} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sn_evaluate:
    """Arithmetic exact match of every run through lm-eval (paper scale: lm-eval's tasks)."""
    input:
        runs=lambda wc: sn_runs(wc.scale),
        data=f"{SN}/data",
        code=code("siamesenorm", "evaluate"),
    output:
        f"{SN}/eval.json",
    log:
        f"{SN}/logs/evaluate.log",
    benchmark:
        f"{SN}/benchmarks/sn_evaluate.tsv"
    params:
        runtime=runtime_of(sn_evaluate_job),
        cfg=lambda wc: as_json(sn(wc.scale, "eval")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(sn_evaluate_job),
    shell:
        "python -m methods.siamesenorm evaluate --config {params.cfg:q} --runs {input.runs} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sn_aggregate:
    """Table, the claim metrics (summary.json) and the loss-curve figure."""
    input:
        runs=lambda wc: sn_runs(wc.scale),
        eval=f"{SN}/eval.json",
        steptime=f"{SN}/steptime.json",
        code=code("siamesenorm", "aggregate"),
    output:
        table=f"{SN}/table.csv",
        summary=f"{SN}/summary.json",
        figure=report(
            f"{SN}/figures/loss_curves.png",
            caption="../report/siamesenorm.rst",
            category="siamesenorm",
            labels={"scale": "{scale}", "figure": "loss curves and gradient norms"},
        ),
        caption=f"{SN}/figures/loss_curves.caption.txt",
    log:
        f"{SN}/logs/aggregate.log",
    benchmark:
        f"{SN}/benchmarks/sn_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(sn(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.siamesenorm aggregate --config {params.cfg:q} --runs {input.runs} "
        "--eval {input.eval} --steptime {input.steptime} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["siamesenorm"] = lambda scale: [f"{RESULTS}/{scale}/siamesenorm/figures/loss_curves.png"]
