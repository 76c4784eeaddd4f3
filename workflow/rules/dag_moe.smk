# DAG-MoE (arXiv 2606.01062): the C1/C2/C3 world, one mixture LM per (arch, seed) with its
# evaluation, D2's 1-layer composition runs per aggregation (all seeds in one job), the
# interleaved step-time measurement, aggregation and the figure; claims D1-D4 through the
# generic `claims` rule (methods/dag_moe/).
DM = f"{RESULTS}/{{scale}}/dag_moe"


rule dm_data:
    """The world (permutations of Z_17, held-out pairs, mixture weights) and the tokenizer;
    at paper scale the hub tokenizer and the corpus text (train.txt, val.txt)."""
    input:
        code=code("dag_moe", "data"),
    output:
        directory(f"{DM}/data"),
    log:
        f"{DM}/logs/data.log",
    benchmark:
        f"{DM}/benchmarks/dm_data.tsv"
    params:
        cfg=lambda wc: as_json(dm(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.dag_moe data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule dm_shards:
    """Paper scale: the corpus text tokenized once with the hub tokenizer into on-disk shards
    (train/, val/) that every LM run reads by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{DM}/data",
        code=code("core", "shards"),
    output:
        directory(f"{DM}/shards"),
    log:
        f"{DM}/logs/shards.log",
    benchmark:
        f"{DM}/benchmarks/dm_shards.tsv"
    params:
        # documents end with a newline in the text files, as they were joined before; no EOS
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


rule dm_train:
    """One mixture LM (arch, seed), evaluated at the end: val loss, C1/C2 probes, load CV, edges."""
    input:
        data=f"{DM}/data",
        # a hub corpus's token shards (paper scale); the generated mixture makes its batches on the fly
        shards=lambda wc: [] if dm(wc.scale, "data", "source") == "generated" else f"{RESULTS}/{wc.scale}/dag_moe/shards",
        code=code("dag_moe", "train"),
    output:
        model=directory(f"{DM}/runs/{{arch}}/s{{seed}}"),
        metrics=f"{DM}/runs/{{arch}}/s{{seed}}.json",
    log:
        f"{DM}/logs/train/{{arch}}_s{{seed}}.log",
    benchmark:
        f"{DM}/benchmarks/dm_train__{{arch}}_s{{seed}}.tsv"
    wildcard_constraints:
        arch=r"[A-Za-z][A-Za-z0-9_]*",
    params:
        runtime=runtime_of(dm_train_job),
        cfg=lambda wc: as_json(dm_step_cfg(wc.scale, "lm")),
        arch=lambda wc: as_json(dm(wc.scale, "archs", wc.arch)),
        ckpt=f"{DM}/checkpoints/{{arch}}_s{{seed}}.pt",
        shards=lambda wc, input: f"--shards {input.shards}" if input.shards else "",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    threads: 1
    conda:
        conda_env
    resources:
        **sized(dm_train_job),
    shell:
        "{params.launch} -m methods.dag_moe train --config {params.cfg:q} --arch {params.arch:q} "
        "--name {wildcards.arch} --seed {wildcards.seed} --data {input.data} {params.shards} "
        "--checkpoint {params.ckpt} --out {output.model} --metrics {output.metrics} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule dm_compose:
    """D2: the 1-layer composition model (loss on the answer) for every seed, one aggregation."""
    input:
        data=f"{DM}/data",
        code=code("dag_moe", "compose"),
    output:
        f"{DM}/compose1L/{{agg}}.json",
    log:
        f"{DM}/logs/compose1L_{{agg}}.log",
    benchmark:
        f"{DM}/benchmarks/dm_compose__{{agg}}.tsv"
    wildcard_constraints:
        agg="sum|dag",
    params:
        runtime=runtime_of(dm_compose_job),
        cfg=lambda wc: as_json(dm_step_cfg(wc.scale, "compose")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(dm_compose_job),
    shell:
        "python -m methods.dag_moe compose --config {params.cfg:q} --aggregation {wildcards.agg} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule dm_timing:
    """Step time of every arch (first seed's trained model), interleaved in one process, so the
    ratios are not distorted by whatever else the machine runs."""
    input:
        data=f"{DM}/data",
        runs=lambda wc: dm_runs(wc.scale, "model", first_seed_only=True),
        code=code("dag_moe", "timing"),
    output:
        f"{DM}/timing.json",
    log:
        f"{DM}/logs/timing.log",
    benchmark:
        f"{DM}/benchmarks/dm_timing.tsv"
    params:
        runtime=runtime_of(dm_timing_job),
        cfg=lambda wc: as_json(dm(wc.scale, "timing")),
        names=lambda wc: " ".join(dm_archs(wc.scale)),
        seq_len=lambda wc: dm(wc.scale, "data", "seq_len"),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(dm_timing_job),
    shell:
        "python -m methods.dag_moe timing --config {params.cfg:q} --names {params.names} "
        "--runs {input.runs} --data {input.data} --seq-len {params.seq_len} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule dm_lm_eval:
    """Paper scale: zero-shot lm-eval tasks of one trained LM (the downstream set of config/scales/paper.yaml)."""
    input:
        model=f"{DM}/runs/{{arch}}/s{{seed}}",
        code=code("dag_moe", "lm-eval"),
    output:
        f"{DM}/lm_eval/{{arch}}_s{{seed}}.json",
    log:
        f"{DM}/logs/lm_eval/{{arch}}_s{{seed}}.log",
    benchmark:
        f"{DM}/benchmarks/dm_lm_eval__{{arch}}_s{{seed}}.tsv"
    wildcard_constraints:
        arch=r"[A-Za-z][A-Za-z0-9_]*",
    params:
        runtime=runtime_of(dm_lm_eval_job),
        cfg=lambda wc: as_json(dm(wc.scale, "downstream")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(dm_lm_eval_job),
    shell:
        "python -m methods.dag_moe lm-eval --config {params.cfg:q} --model {input.model} "
        "--name {wildcards.arch} --seed {wildcards.seed} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule dm_aggregate:
    """The run table and the claim metrics (summary.json, read by the generic claims rule)."""
    input:
        runs=lambda wc: dm_runs(wc.scale, "metrics"),
        compose=[f"{DM}/compose1L/sum.json", f"{DM}/compose1L/dag.json"],
        timing=f"{DM}/timing.json",
        lm_eval=lambda wc: dm_lm_eval(wc.scale),
        code=code("dag_moe", "aggregate"),
    output:
        table=f"{DM}/table.csv",
        summary=f"{DM}/summary.json",
    log:
        f"{DM}/logs/aggregate.log",
    benchmark:
        f"{DM}/benchmarks/dm_aggregate.tsv"
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.dag_moe aggregate --runs {input.runs} --compose {input.compose} "
        "--timing {input.timing} --lm-eval {input.lm_eval} --table {output.table} "
        "--summary {output.summary} > {log} 2>&1"


rule dm_figure:
    input:
        summary=f"{DM}/summary.json",
        code=code("dag_moe", "figure"),
    output:
        fig=report(
            f"{DM}/figures/dag_moe.png",
            caption="../report/dag_moe.rst",
            category="dag_moe",
            labels={"scale": "{scale}", "figure": "val loss and D2"},
        ),
        caption=f"{DM}/figures/dag_moe.caption.txt",
    log:
        f"{DM}/logs/figure.log",
    benchmark:
        f"{DM}/benchmarks/dm_figure.tsv"
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.dag_moe figure --summary {input.summary} --out {output.fig} > {log} 2>&1"


FIGURES["dag_moe"] = lambda scale: [f"{RESULTS}/{scale}/dag_moe/figures/dag_moe.png"]
