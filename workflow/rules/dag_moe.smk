# DAG-MoE (arXiv 2606.01062): the C1/C2/C3 world, one mixture LM per (arch, seed) with its
# evaluation, D2's 1-layer composition runs per aggregation (all seeds in one job), the
# interleaved step-time measurement, aggregation and the figure; claims D1-D4 through the
# generic `claims` rule (methods/dag_moe/).
include: "helpers/dag_moe.smk"  # its config helpers and GPU job sizers


DAG_MOE_DIR = f"{RESULTS}/{{scale}}/dag_moe"


rule dag_moe_data:
    """The world (permutations of Z_17, held-out pairs, mixture weights) and the tokenizer;
    at paper scale the hub tokenizer and the corpus text (train.txt, val.txt)."""
    input:
        code=code("dag_moe", "data"),
    output:
        directory(f"{DAG_MOE_DIR}/data"),
    log:
        f"{DAG_MOE_DIR}/logs/data.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "dag_moe", "data")),
    shell:
        "python -m methods.dag_moe data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule dag_moe_shards:
    """Paper scale: the corpus text tokenized once with the hub tokenizer into on-disk shards
    (train/, val/) that every LM run reads by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{DAG_MOE_DIR}/data",
        code=code("core", "shards"),
    output:
        directory(f"{DAG_MOE_DIR}/shards"),
    log:
        f"{DAG_MOE_DIR}/logs/shards.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_shards.tsv"
    params:
        # documents end with a newline in the text files, as they were joined before; no EOS
        eos="no",
    shell:
        "python -m methods.core shards --source {input.data:q}/train.txt --val-source {input.data:q}/val.txt "
        "--tokenizer {input.data:q}/tokenizer --eos {params.eos} --out {output:q} > {log:q} 2>&1"


rule dag_moe_train:
    """One mixture LM (arch, seed), evaluated at the end: val loss, C1/C2 probes, load CV, edges."""
    input:
        data=f"{DAG_MOE_DIR}/data",
        shards=lambda wc: dag_moe_shards(wc.scale),
        code=code("dag_moe", "train"),
    output:
        model=directory(f"{DAG_MOE_DIR}/runs/{{arch}}/s{{seed}}"),
        metrics=f"{DAG_MOE_DIR}/runs/{{arch}}/s{{seed}}.json",
    log:
        f"{DAG_MOE_DIR}/logs/train/{{arch}}_s{{seed}}.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_train__{{arch}}_s{{seed}}.tsv"
    wildcard_constraints:
        arch=r"[A-Za-z][A-Za-z0-9_]*",
    resources:
        **sized(dag_moe_train_job),
    params:
        runtime=runtime_of(dag_moe_train_job),
        cfg=lambda wc: as_json(dag_moe_step_cfg(wc.scale, "lm")),
        arch=lambda wc: as_json(hp(wc.scale, "dag_moe", "archs", wc.arch)),
        ckpt=f"{DAG_MOE_DIR}/checkpoints/{{arch}}_s{{seed}}.pt",
        shards=lambda wc, input: f"--shards {shell_words(input.shards)}" if input.shards else "",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    shell:
        "{params.launch} -m methods.dag_moe train --config {params.cfg:q} --arch {params.arch:q} "
        "--name {wildcards.arch:q} --seed {wildcards.seed:q} --data {input.data:q} {params.shards} "
        "--checkpoint {params.ckpt:q} --out {output.model:q} --metrics {output.metrics:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dag_moe_compose:
    """D2: the 1-layer composition model (loss on the answer) for every seed, one aggregation."""
    input:
        data=f"{DAG_MOE_DIR}/data",
        code=code("dag_moe", "compose"),
    output:
        f"{DAG_MOE_DIR}/compose1L/{{agg}}.json",
    log:
        f"{DAG_MOE_DIR}/logs/compose1L_{{agg}}.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_compose__{{agg}}.tsv"
    wildcard_constraints:
        agg="sum|dag",
    resources:
        **sized(dag_moe_compose_job),
    params:
        runtime=runtime_of(dag_moe_compose_job),
        cfg=lambda wc: as_json(dag_moe_step_cfg(wc.scale, "compose")),
    shell:
        "python -m methods.dag_moe compose --config {params.cfg:q} --aggregation {wildcards.agg:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dag_moe_timing:
    """Step time of every arch (first seed's trained model), interleaved in one process, so the
    ratios are not distorted by whatever else the machine runs."""
    input:
        data=f"{DAG_MOE_DIR}/data",
        runs=lambda wc: dag_moe_runs(wc.scale, "model", first_seed_only=True),
        code=code("dag_moe", "timing"),
    output:
        f"{DAG_MOE_DIR}/timing.json",
    log:
        f"{DAG_MOE_DIR}/logs/timing.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_timing.tsv"
    resources:
        **sized(dag_moe_timing_job),
    params:
        runtime=runtime_of(dag_moe_timing_job),
        cfg=lambda wc: as_json(hp(wc.scale, "dag_moe", "timing")),
        names=lambda wc: shell_words(dag_moe_archs(wc.scale)),
        seq_len=lambda wc: hp(wc.scale, "dag_moe", "data", "seq_len"),
    shell:
        "python -m methods.dag_moe timing --config {params.cfg:q} --names {params.names} "
        "--runs {input.runs:q} --data {input.data:q} --seq-len {params.seq_len} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dag_moe_lm_eval:
    """Paper scale: zero-shot lm-eval tasks of one trained LM (the downstream set of config/scales/paper.yaml)."""
    input:
        model=f"{DAG_MOE_DIR}/runs/{{arch}}/s{{seed}}",
        code=code("dag_moe", "lm-eval"),
    output:
        f"{DAG_MOE_DIR}/lm_eval/{{arch}}_s{{seed}}.json",
    log:
        f"{DAG_MOE_DIR}/logs/lm_eval/{{arch}}_s{{seed}}.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_lm_eval__{{arch}}_s{{seed}}.tsv"
    wildcard_constraints:
        arch=r"[A-Za-z][A-Za-z0-9_]*",
    resources:
        **sized(dag_moe_lm_eval_job),
    params:
        runtime=runtime_of(dag_moe_lm_eval_job),
        cfg=lambda wc: as_json(hp(wc.scale, "dag_moe", "downstream")),
    shell:
        "python -m methods.dag_moe lm-eval --config {params.cfg:q} --model {input.model:q} "
        "--name {wildcards.arch:q} --seed {wildcards.seed:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dag_moe_aggregate:
    """The run table and the claim metrics (summary.json, read by the generic claims rule)."""
    input:
        runs=lambda wc: dag_moe_runs(wc.scale, "metrics"),
        compose=[f"{DAG_MOE_DIR}/compose1L/sum.json", f"{DAG_MOE_DIR}/compose1L/dag.json"],
        timing=f"{DAG_MOE_DIR}/timing.json",
        lm_eval=lambda wc: dag_moe_lm_eval_outputs(wc.scale),
        code=code("dag_moe", "aggregate"),
    output:
        table=f"{DAG_MOE_DIR}/table.csv",
        summary=f"{DAG_MOE_DIR}/summary.json",
    log:
        f"{DAG_MOE_DIR}/logs/aggregate.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_aggregate.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.dag_moe aggregate --runs {input.runs:q} --compose {input.compose:q} "
        "--timing {input.timing:q} --lm-eval {input.lm_eval:q} --table {output.table:q} "
        "--summary {output.summary:q} > {log:q} 2>&1"


rule dag_moe_figure:
    input:
        summary=f"{DAG_MOE_DIR}/summary.json",
        code=code("dag_moe", "figure"),
    output:
        fig=report(
            f"{DAG_MOE_DIR}/figures/dag_moe.png",
            caption="../../methods/dag_moe/report.rst",
            category="dag_moe",
            labels={"scale": "{scale}", "figure": "val loss and D2"},
        ),
        caption=f"{DAG_MOE_DIR}/figures/dag_moe.caption.txt",
    log:
        f"{DAG_MOE_DIR}/logs/figure.log",
    benchmark:
        f"{DAG_MOE_DIR}/benchmarks/dag_moe_figure.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.dag_moe figure --summary {input.summary:q} --out {output.fig:q} > {log:q} 2>&1"


FIGURES["dag_moe"] = lambda scale: [f"{RESULTS}/{scale}/dag_moe/figures/dag_moe.png"]
