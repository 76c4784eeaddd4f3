# rl_sgd (arXiv 2602.07729): SGD vs AdamW in GRPO with a verifiable reward (tiny: an addition task,
# AdamW warm start per width; paper: hub math models on DeepScaleR) — prompts, a base per width or
# hub model, GRPO runs per optimizer × lr × seed, bf16/fp32 update sparsity,
# the SFT-continuation contrast, the trl GRPOTrainer cross-check, figures and claims R1–R5.
include: "helpers/rl_sgd.smk"  # its config helpers and GPU job sizers


RL_SGD_DIR = f"{RESULTS}/{{scale}}/rl_sgd"


rule rl_sgd_prompts:
    """Train / RL / held-out pairs of the addition task and the multiplication contrast."""
    input:
        code=code("rl_sgd", "prompts"),
    output:
        directory(f"{RL_SGD_DIR}/data"),
    log:
        f"{RL_SGD_DIR}/logs/prompts.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_prompts.tsv"
    params:
        cfg=lambda wc: as_json(rl_sgd_prompts_cfg(wc.scale)),
    shell:
        "python -m methods.rl_sgd prompts --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule rl_sgd_warmstart:
    """The base d<width> (tiny: AdamW SFT warm start, rounded to bf16) or m<i> (hub model i of
    hub.models in bf16, scored on the held-out sets)."""
    input:
        data=f"{RL_SGD_DIR}/data",
        code=code("rl_sgd", "warmstart"),
    output:
        directory(f"{RL_SGD_DIR}/base/{{rs_b}}"),
    log:
        f"{RL_SGD_DIR}/logs/warmstart_{{rs_b}}.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_warmstart__{{rs_b}}.tsv"
    wildcard_constraints:
        rs_b=r"d\d+|m\d+",
    resources:
        **sized(rl_sgd_warmstart_job),
    params:
        runtime=runtime_of(rl_sgd_warmstart_job),
        cfg=lambda wc: as_json(rl_sgd_warmstart_cfg(wc.scale, wc.rs_b)),
    shell:
        "python -m methods.rl_sgd warmstart --config {params.cfg:q} --base_key {wildcards.rs_b:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_grpo:
    """One GRPO run (optimizer, lr, seed) from a base."""
    input:
        data=f"{RL_SGD_DIR}/data",
        base=f"{RL_SGD_DIR}/base/{{rs_b}}",
        code=code("rl_sgd", "grpo"),
    output:
        directory(f"{RL_SGD_DIR}/runs/{{rs_b}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}"),
    log:
        f"{RL_SGD_DIR}/logs/grpo/{{rs_b}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_grpo__{{rs_b}}_{{rs_opt}}_lr{{rs_lr}}_s{{seed}}.tsv"
    wildcard_constraints:
        rs_b=r"d\d+|m\d+",
        rs_opt="adamw|sgd|sgd_mom|adam_nomom|adam_noadapt",
        rs_lr=r"[0-9.]+(e-?[0-9]+)?",
    resources:
        **sized(rl_sgd_grpo_job),
    params:
        runtime=runtime_of(rl_sgd_grpo_job),
        cfg=lambda wc: as_json(rl_sgd_grpo_cfg(wc.scale)),
    shell:
        "python -m methods.rl_sgd grpo --config {params.cfg:q} --optimizer {wildcards.rs_opt:q} "
        "--lr {wildcards.rs_lr:q} --seed {wildcards.seed:q} --base {input.base:q} --data {input.data:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_sparsity:
    """bf16 / fp32 changed fractions per tensor and category, and the rank of ΔW, of every run."""
    input:
        runs=lambda wc: rl_sgd_runs(wc.scale),
        bases=lambda wc: rl_sgd_bases(wc.scale),
        code=code("rl_sgd", "sparsity"),
    output:
        f"{RL_SGD_DIR}/sparsity.json",
    log:
        f"{RL_SGD_DIR}/logs/sparsity.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_sparsity.tsv"
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(hp(wc.scale, "rl_sgd", "sparsity")),
    shell:
        "python -m methods.rl_sgd sparsity --config {params.cfg:q} --runs {input.runs:q} "
        "--bases {input.bases:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_sft:
    """SFT-continuation contrast (tiny: multiplication; hub: the RL dataset's worked solutions)
    with each optimizer, from the widest / main base, once per seed."""
    input:
        data=f"{RL_SGD_DIR}/data",
        base=lambda wc: rl_sgd_main_base(wc.scale),
        code=code("rl_sgd", "sft"),
    output:
        f"{RL_SGD_DIR}/sft_contrast.json",
    log:
        f"{RL_SGD_DIR}/logs/sft.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_sft.tsv"
    resources:
        **sized(rl_sgd_sft_job),
    params:
        runtime=runtime_of(rl_sgd_sft_job),
        cfg=lambda wc: as_json(rl_sgd_sft_cfg(wc.scale)),
    shell:
        "python -m methods.rl_sgd sft --config {params.cfg:q} --base {input.base:q} --data {input.data:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_trl_check:
    """First GRPO update of our loop vs trl's GRPOTrainer from the same weights and completions."""
    input:
        code=code("rl_sgd", "trl_check"),
    output:
        f"{RL_SGD_DIR}/trl_check.json",
    log:
        f"{RL_SGD_DIR}/logs/trl_check.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_trl_check.tsv"
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(hp(wc.scale, "rl_sgd", "trl_check")),
    shell:
        "TQDM_DISABLE=1 python -m methods.rl_sgd trl_check --config {params.cfg:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_lm_eval:
    """Hub path: the lm-eval tasks (hub.lm_eval_tasks) on every base and run, one process."""
    input:
        runs=lambda wc: rl_sgd_runs(wc.scale),
        bases=lambda wc: rl_sgd_bases(wc.scale),
        code=code("rl_sgd", "lm_eval"),
    output:
        f"{RL_SGD_DIR}/lm_eval.json",
    log:
        f"{RL_SGD_DIR}/logs/lm_eval.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_lm_eval.tsv"
    resources:
        **sized(rl_sgd_lm_eval_job),
    params:
        runtime=runtime_of(rl_sgd_lm_eval_job),
        cfg=lambda wc: as_json(rl_sgd_lm_eval_cfg(wc.scale)),
    shell:
        "python -m methods.rl_sgd lm_eval --config {params.cfg:q} --models {input.bases:q} {input.runs:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rl_sgd_aggregate:
    """Table, claim metrics (summary.json) and the two figures (hub path: with the lm-eval scores)."""
    input:
        unpack(rl_sgd_aggregate_extra),
        sparsity=f"{RL_SGD_DIR}/sparsity.json",
        sft=f"{RL_SGD_DIR}/sft_contrast.json",
        trl=f"{RL_SGD_DIR}/trl_check.json",
        code=code("rl_sgd", "aggregate"),
    output:
        table=f"{RL_SGD_DIR}/table.csv",
        summary=f"{RL_SGD_DIR}/summary.json",
        fig_acc=report(
            f"{RL_SGD_DIR}/figures/acc_vs_changed.png",
            caption="../../methods/rl_sgd/report.rst",
            category="rl_sgd",
            labels={"scale": "{scale}", "figure": "accuracy vs bf16 changed fraction"},
        ),
        fig_width=report(
            f"{RL_SGD_DIR}/figures/width_trend.png",
            caption="../../methods/rl_sgd/report.rst",
            category="rl_sgd",
            labels={"scale": "{scale}", "figure": "width trend of the sparsity ratio"},
        ),
    log:
        f"{RL_SGD_DIR}/logs/aggregate.log",
    benchmark:
        f"{RL_SGD_DIR}/benchmarks/rl_sgd_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(rl_sgd_analysis_cfg(wc.scale)),
        lm_eval=lambda wc, input: f"--lm_eval {shell_words(input.lm_eval)}" if "lm_eval" in input.keys() else "",
    shell:
        "python -m methods.rl_sgd aggregate --config {params.cfg:q} --sparsity {input.sparsity:q} "
        "--sft {input.sft:q} --trl {input.trl:q} --table {output.table:q} --summary {output.summary:q} "
        "--fig_acc {output.fig_acc:q} --fig_width {output.fig_width:q} {params.lm_eval} > {log:q} 2>&1"


FIGURES["rl_sgd"] = lambda scale: [
    f"{RESULTS}/{scale}/rl_sgd/figures/acc_vs_changed.png",
    f"{RESULTS}/{scale}/rl_sgd/figures/width_trend.png",
]
