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
        code=code("siamesenorm", "data", "core.data", "core.tokenizer"),
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


rule sn_train:
    """One run of the sweep; resumes from its checkpoint after a crash."""
    input:
        data=f"{SN}/data",
        code=code("siamesenorm", "run", "model", "core.train", "core.models", "core.data", "core.tokenizer"),
    output:
        directory(f"{SN}/runs/{{scheme}}_lr{{lr}}_s{{seed}}"),
    log:
        f"{SN}/logs/train/{{scheme}}_lr{{lr}}_s{{seed}}.log",
    benchmark:
        f"{SN}/benchmarks/sn_train__{{scheme}}_lr{{lr}}_s{{seed}}.tsv"
    params:
        cfg=lambda wc: as_json(sn(wc.scale, "run")),
        ckpt=f"{SN}/checkpoints/{{scheme}}_lr{{lr}}_s{{seed}}.pt",
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        gpu=res("gpu"),
    shell:
        "python -m methods.siamesenorm train --config {params.cfg:q} --scheme {wildcards.scheme} "
        "--lr {wildcards.lr} --seed {wildcards.seed} --data {input.data} --checkpoint {params.ckpt} "
        "--out {output} --threads {threads} > {log} 2>&1"


rule sn_steptime:
    """Training-step time of every scheme, interleaved in one process (C4)."""
    input:
        code=code("siamesenorm", "steptime", "model", "core.models"),
    output:
        f"{SN}/steptime.json",
    log:
        f"{SN}/logs/steptime.log",
    benchmark:
        f"{SN}/benchmarks/sn_steptime.tsv"
    params:
        cfg=lambda wc: as_json(sn_steptime_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        gpu=res("gpu"),
    shell:
        "python -m methods.siamesenorm steptime --config {params.cfg:q} --out {output} "
        "--threads {threads} > {log} 2>&1"


rule sn_evaluate:
    """Arithmetic exact match of every run through lm-eval (paper scale: lm-eval's tasks)."""
    input:
        runs=lambda wc: sn_runs(wc.scale),
        data=f"{SN}/data",
        code=code("siamesenorm", "evaluate", "model", "core.evaluate", "core.models"),
    output:
        f"{SN}/eval.json",
    log:
        f"{SN}/logs/evaluate.log",
    benchmark:
        f"{SN}/benchmarks/sn_evaluate.tsv"
    params:
        cfg=lambda wc: as_json(sn(wc.scale, "eval")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
        gpu=res("gpu"),
    shell:
        "python -m methods.siamesenorm evaluate --config {params.cfg:q} --runs {input.runs} "
        "--data {input.data} --out {output} --threads {threads} > {log} 2>&1"


rule sn_aggregate:
    """Table, the claim metrics (summary.json) and the loss-curve figure."""
    input:
        runs=lambda wc: sn_runs(wc.scale),
        eval=f"{SN}/eval.json",
        steptime=f"{SN}/steptime.json",
        code=code("siamesenorm", "analysis", "core.plots"),
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
