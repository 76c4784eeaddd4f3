# rl_sgd (arXiv 2602.07729): SGD vs AdamW in GRPO on a verifiable addition task — prompts,
# AdamW warm start per width, GRPO runs per optimizer × lr × seed, bf16/fp32 update sparsity,
# the SFT-continuation contrast, the trl GRPOTrainer cross-check, figures and claims R1–R5.
RS = f"{RESULTS}/{{scale}}/rl_sgd"


wildcard_constraints:
    rs_opt="adamw|sgd|sgd_mom|adam_nomom|adam_noadapt",
    rs_lr=r"[0-9.]+(e-?[0-9]+)?",
    rs_w=r"\d+",


rule rs_prompts:
    """Train / RL / held-out pairs of the addition task and the multiplication contrast."""
    input:
        code=code("rl_sgd", "prompts"),
    output:
        directory(f"{RS}/data"),
    log:
        f"{RS}/logs/prompts.log",
    benchmark:
        f"{RS}/benchmarks/rs_prompts.tsv"
    params:
        cfg=lambda wc: as_json(rs(wc.scale, "prompts")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.rl_sgd prompts --config {params.cfg:q} --out {output} > {log} 2>&1"


rule rs_warmstart:
    """AdamW SFT warm start of one width, rounded to bf16."""
    input:
        data=f"{RS}/data",
        code=code("rl_sgd", "warmstart"),
    output:
        directory(f"{RS}/base/d{{rs_w}}"),
    log:
        f"{RS}/logs/warmstart_d{{rs_w}}.log",
    benchmark:
        f"{RS}/benchmarks/rs_warmstart__d{{rs_w}}.tsv"
    params:
        runtime=runtime_of(rs_warmstart_job),
        cfg=lambda wc: as_json(rs_warm_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(rs_warmstart_job),
    shell:
        "python -m methods.rl_sgd warmstart --config {params.cfg:q} --width {wildcards.rs_w} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule rs_grpo:
    """One GRPO run (optimizer, lr, seed) from the width's base."""
    input:
        data=f"{RS}/data",
        base=f"{RS}/base/d{{rs_w}}",
        code=code("rl_sgd", "grpo"),
    output:
        directory(f"{RS}/runs/d{{rs_w}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}"),
    log:
        f"{RS}/logs/grpo/d{{rs_w}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}.log",
    benchmark:
        f"{RS}/benchmarks/rs_grpo__d{{rs_w}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}.tsv"
    params:
        runtime=runtime_of(rs_grpo_job),
        cfg=lambda wc: as_json(rs(wc.scale, "grpo")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(rs_grpo_job),
    shell:
        "python -m methods.rl_sgd grpo --config {params.cfg:q} --optimizer {wildcards.rs_opt} "
        "--lr {wildcards.rs_lr} --seed {wildcards.seed} --base {input.base} --data {input.data} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule rs_sparsity:
    """bf16 / fp32 changed fractions per tensor and category, and the rank of ΔW, of every run."""
    input:
        runs=lambda wc: rs_runs(wc.scale),
        bases=lambda wc: rs_bases(wc.scale),
        code=code("rl_sgd", "sparsity"),
    output:
        f"{RS}/sparsity.json",
    log:
        f"{RS}/logs/sparsity.log",
    benchmark:
        f"{RS}/benchmarks/rs_sparsity.tsv"
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(rs(wc.scale, "sparsity")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.rl_sgd sparsity --config {params.cfg:q} --runs {input.runs} "
        "--bases {input.bases} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule rs_sft:
    """SFT-continuation contrast (multiplication) with each optimizer, from the widest base."""
    input:
        data=f"{RS}/data",
        base=lambda wc: f"{RESULTS}/{wc.scale}/rl_sgd/base/d{max(rs(wc.scale, 'widths'))}",
        code=code("rl_sgd", "sft"),
    output:
        f"{RS}/sft_contrast.json",
    log:
        f"{RS}/logs/sft.log",
    benchmark:
        f"{RS}/benchmarks/rs_sft.tsv"
    params:
        runtime=runtime_of(rs_sft_job),
        cfg=lambda wc: as_json(rs(wc.scale, "sft")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(rs_sft_job),
    shell:
        "python -m methods.rl_sgd sft --config {params.cfg:q} --base {input.base} --data {input.data} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule rs_trl_check:
    """First GRPO update of our loop vs trl's GRPOTrainer from the same weights and completions."""
    input:
        code=code("rl_sgd", "trl_check"),
    output:
        f"{RS}/trl_check.json",
    log:
        f"{RS}/logs/trl_check.log",
    benchmark:
        f"{RS}/benchmarks/rs_trl_check.tsv"
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(rs(wc.scale, "trl_check")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "TQDM_DISABLE=1 python -m methods.rl_sgd trl_check --config {params.cfg:q} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule rs_aggregate:
    """Table, claim metrics (summary.json) and the two figures."""
    input:
        sparsity=f"{RS}/sparsity.json",
        sft=f"{RS}/sft_contrast.json",
        trl=f"{RS}/trl_check.json",
        code=code("rl_sgd", "aggregate"),
    output:
        table=f"{RS}/table.csv",
        summary=f"{RS}/summary.json",
        fig_acc=report(
            f"{RS}/figures/acc_vs_changed.png",
            caption="../report/rl_sgd.rst",
            category="rl_sgd",
            labels={"scale": "{scale}", "figure": "accuracy vs bf16 changed fraction"},
        ),
        fig_width=report(
            f"{RS}/figures/width_trend.png",
            caption="../report/rl_sgd.rst",
            category="rl_sgd",
            labels={"scale": "{scale}", "figure": "width trend of the sparsity ratio"},
        ),
    log:
        f"{RS}/logs/aggregate.log",
    benchmark:
        f"{RS}/benchmarks/rs_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(rs_analysis_cfg(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.rl_sgd aggregate --config {params.cfg:q} --sparsity {input.sparsity} "
        "--sft {input.sft} --trl {input.trl} --table {output.table} --summary {output.summary} "
        "--fig_acc {output.fig_acc} --fig_width {output.fig_width} > {log} 2>&1"


FIGURES["rl_sgd"] = lambda scale: [
    f"{RESULTS}/{scale}/rl_sgd/figures/acc_vs_changed.png",
    f"{RESULTS}/{scale}/rl_sgd/figures/width_trend.png",
]
