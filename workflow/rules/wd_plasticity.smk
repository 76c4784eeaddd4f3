# Weight Decay Improves Language Model Plasticity (arXiv 2602.11137): pretrain a sweep over
# the AdamW weight decay λ, fine-tune every base on each downstream task, evaluate through
# lm-eval, probe the bases, aggregate, and check claims W1-W3 (methods/wd_plasticity/).
WDP = f"{RESULTS}/{{scale}}/wd_plasticity"


wildcard_constraints:
    wd=r"[0-9.]+(e-?[0-9]+)?",
    task=r"[A-Za-z][A-Za-z0-9]*",


rule wdp_data:
    """The synthetic world (or, at paper scale, the hub corpus and SFT sets)."""
    input:
        code=code("wd_plasticity", "data"),
    output:
        directory(f"{WDP}/data"),
    log:
        f"{WDP}/logs/data.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_data.tsv"
    params:
        cfg=lambda wc: as_json(wdp(wc.scale, "world")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.wd_plasticity data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule wdp_tokenizer:
    """Tokenizer trained on the pretraining corpus and the task texts (so every character of
    the downstream formats has a token)."""
    input:
        data=f"{WDP}/data",
        code=code("core", "tokenizer"),
    output:
        directory(f"{WDP}/tokenizer"),
    log:
        f"{WDP}/logs/tokenizer.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_tokenizer.tsv"
    params:
        kind=lambda wc: wdp(wc.scale, "tokenizer", "kind"),
        vocab=lambda wc: wdp(wc.scale, "tokenizer", "vocab_size"),
        texts=lambda wc, input: " ".join(
            [f"{input.data}/pretrain.txt"]
            + [f"{input.data}/tasks/{t}/{s}.jsonl" for t in wdp_tasks(wc.scale) for s in ("train", "dev", "test")]
        ),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.core tokenizer --texts {params.texts} --kind {params.kind} "
        "--vocab-size {params.vocab} --out {output} > {log} 2>&1"


rule wdp_shards:
    """pretrain.txt and val.txt tokenized once into on-disk shards (train/, val/), which
    pretraining and the probes read by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{WDP}/data",
        tokenizer=f"{WDP}/tokenizer",
        code=code("core", "shards"),
    output:
        directory(f"{WDP}/shards"),
    log:
        f"{WDP}/logs/shards.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_shards.tsv"
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
        "python -m methods.core shards --source {input.data}/pretrain.txt --val-source {input.data}/val.txt "
        "--tokenizer {input.tokenizer} --eos {params.eos} --out {output} > {log} 2>&1"


rule wdp_pretrain:
    """One base model at weight decay λ; resumes from its checkpoint after a crash."""
    input:
        shards=f"{WDP}/shards",
        tokenizer=f"{WDP}/tokenizer",
        code=code("wd_plasticity", "pretrain"),
    output:
        directory(f"{WDP}/base/wd{{wd}}_s{{seed}}"),
    log:
        f"{WDP}/logs/pretrain/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_pretrain__wd{{wd}}_s{{seed}}.tsv"
    params:
        runtime=runtime_of(wdp_pretrain_job),
        cfg=lambda wc: as_json(wdp(wc.scale, "pretrain")),
        ckpt=f"{WDP}/checkpoints/base_wd{{wd}}_s{{seed}}.pt",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    threads: 1
    conda:
        conda_env
    resources:
        **sized(wdp_pretrain_job),
    shell:
        "{params.launch} -m methods.wd_plasticity pretrain --config {params.cfg:q} --weight-decay {wildcards.wd} --seed {wildcards.seed} "
        "--shards {input.shards} --tokenizer {input.tokenizer} --checkpoint {params.ckpt} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule wdp_finetune:
    """SFT of one base on one task over the LR grid (λ_ft fixed); keeps the dev-best run."""
    input:
        base=f"{WDP}/base/wd{{wd}}_s{{seed}}",
        data=f"{WDP}/data",
        code=code("wd_plasticity", "finetune"),
    output:
        model=directory(f"{WDP}/ft/wd{{wd}}_s{{seed}}/{{task}}"),
        metrics=f"{WDP}/ft/wd{{wd}}_s{{seed}}/{{task}}.json",
    log:
        f"{WDP}/logs/finetune/wd{{wd}}_s{{seed}}_{{task}}.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_finetune__wd{{wd}}_s{{seed}}_{{task}}.tsv"
    params:
        runtime=runtime_of(wdp_finetune_job),
        cfg=lambda wc: as_json(wdp(wc.scale, "finetune")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(wdp_finetune_job),
    shell:
        "python -m methods.wd_plasticity finetune --config {params.cfg:q} --base {input.base} "
        "--task-dir {input.data}/tasks/{wildcards.task} --seed {wildcards.seed} "
        "--out {output.model} --metrics {output.metrics} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule wdp_lm_eval_tasks:
    """Our downstream test sets as lm-eval task YAMLs (loglikelihood + generation per task)."""
    input:
        data=f"{WDP}/data",
        code=code("wd_plasticity", "export-tasks"),
    output:
        directory(f"{WDP}/lm_eval_tasks"),
    log:
        f"{WDP}/logs/lm_eval_tasks.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_lm_eval_tasks.tsv"
    params:
        cfg=lambda wc: as_json(wdp(wc.scale, "eval")),
        tasks=lambda wc: " ".join(wdp_tasks(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.wd_plasticity export-tasks --config {params.cfg:q} --data {input.data} --tasks {params.tasks} "
        "--out {output} > {log} 2>&1"


rule wdp_evaluate:
    """lm-eval the base and its fine-tuned models (one per task) on the test split."""
    input:
        base=f"{WDP}/base/wd{{wd}}_s{{seed}}",
        tasks=f"{WDP}/lm_eval_tasks",
        ft=lambda wc: wdp_ft(wc, "model"),
        ft_metrics=lambda wc: wdp_ft(wc, "metrics"),
        code=code("wd_plasticity", "evaluate"),
    output:
        f"{WDP}/eval/wd{{wd}}_s{{seed}}.json",
    log:
        f"{WDP}/logs/eval/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_evaluate__wd{{wd}}_s{{seed}}.tsv"
    params:
        runtime=runtime_of(wdp_evaluate_job),
        cfg=lambda wc: as_json(wdp(wc.scale, "eval")),
        tasks=lambda wc: " ".join(wdp_tasks(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(wdp_evaluate_job),
    shell:
        "python -m methods.wd_plasticity evaluate --config {params.cfg:q} --base {input.base} --tasks-dir {input.tasks} "
        "--tasks {params.tasks} "
        "--ft-dirs {input.ft} --ft-metrics {input.ft_metrics} --weight-decay {wildcards.wd} "
        "--seed {wildcards.seed} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule wdp_probes:
    """Linear separability, attention norms / effective rank, and the train-val gap of a base."""
    input:
        base=f"{WDP}/base/wd{{wd}}_s{{seed}}",
        data=f"{WDP}/data",
        shards=f"{WDP}/shards",
        code=code("wd_plasticity", "probes"),
    output:
        f"{WDP}/probes/wd{{wd}}_s{{seed}}.json",
    log:
        f"{WDP}/logs/probes/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_probes__wd{{wd}}_s{{seed}}.tsv"
    params:
        runtime=runtime_of(wdp_probes_job),
        cfg=lambda wc: as_json(wdp(wc.scale, "probes")),
        seq_len=lambda wc: wdp(wc.scale, "pretrain", "seq_len"),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(wdp_probes_job),
    shell:
        "python -m methods.wd_plasticity probes --config {params.cfg:q} --base {input.base} --data {input.data} "
        "--shards {input.shards} "
        "--seq-len {params.seq_len} --weight-decay {wildcards.wd} --seed {wildcards.seed} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule wdp_aggregate:
    """The sweep table and the claim metrics (summary.json, read by the generic claims rule)."""
    input:
        bases=lambda wc: wdp_all(wc.scale, "base"),
        probes=lambda wc: wdp_all(wc.scale, "probes"),
        evals=lambda wc: wdp_all(wc.scale, "eval"),
        code=code("wd_plasticity", "aggregate"),
    output:
        table=f"{WDP}/table.csv",
        summary=f"{WDP}/summary.json",
    log:
        f"{WDP}/logs/aggregate.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(wdp(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.wd_plasticity aggregate --config {params.cfg:q} --bases {input.bases} --probes {input.probes} "
        "--evals {input.evals} --table {output.table} --summary {output.summary} > {log} 2>&1"


rule wdp_figure:
    input:
        table=f"{WDP}/table.csv",
        code=code("wd_plasticity", "figure"),
    output:
        fig=report(
            f"{WDP}/figures/plasticity.png",
            caption="../report/wd_plasticity.rst",
            category="wd_plasticity",
            labels={"scale": "{scale}", "figure": "plasticity sweep"},
        ),
        caption=f"{WDP}/figures/plasticity.caption.txt",
    log:
        f"{WDP}/logs/figure.log",
    benchmark:
        f"{WDP}/benchmarks/wdp_figure.tsv"
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.wd_plasticity figure --table {input.table} --out {output.fig} > {log} 2>&1"


FIGURES["wd_plasticity"] = lambda scale: [f"{RESULTS}/{scale}/wd_plasticity/figures/plasticity.png"]
