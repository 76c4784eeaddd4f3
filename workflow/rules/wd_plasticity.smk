# Weight Decay Improves Language Model Plasticity (arXiv 2602.11137): pretrain a sweep over
# the AdamW weight decay λ, fine-tune every base on each downstream task, evaluate through
# lm-eval, probe the bases, aggregate, and check claims W1-W3 (methods/wd_plasticity/).
include: "helpers/wd_plasticity.smk"  # its config helpers and GPU job sizers


WD_PLASTICITY_DIR = f"{RESULTS}/{{scale}}/wd_plasticity"


rule wd_plasticity_data:
    """The synthetic world (or, at paper scale, the hub corpus and SFT sets)."""
    input:
        code=code("wd_plasticity", "data"),
    output:
        directory(f"{WD_PLASTICITY_DIR}/data"),
    log:
        f"{WD_PLASTICITY_DIR}/logs/data.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "world")),
    shell:
        "python -m methods.wd_plasticity data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule wd_plasticity_tokenizer:
    """Tokenizer trained on the pretraining corpus and the task texts (so every character of
    the downstream formats has a token)."""
    input:
        data=f"{WD_PLASTICITY_DIR}/data",
        code=code("core", "tokenizer"),
    output:
        directory(f"{WD_PLASTICITY_DIR}/tokenizer"),
    log:
        f"{WD_PLASTICITY_DIR}/logs/tokenizer.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_tokenizer.tsv"
    params:
        kind=lambda wc: hp(wc.scale, "wd_plasticity", "tokenizer", "kind"),
        vocab=lambda wc: hp(wc.scale, "wd_plasticity", "tokenizer", "vocab_size"),
        texts=lambda wc, input: shell_words(
            [f"{input.data}/pretrain.txt"]
            + [
                f"{input.data}/tasks/{t}/{s}.jsonl"
                for t in wd_plasticity_tasks(wc.scale)
                for s in ("train", "dev", "test")
            ]
        ),
    shell:
        "python -m methods.core tokenizer --texts {params.texts} --kind {params.kind:q} "
        "--vocab-size {params.vocab} --out {output:q} > {log:q} 2>&1"


rule wd_plasticity_shards:
    """pretrain.txt and val.txt tokenized once into on-disk shards (train/, val/), which
    pretraining and the probes read by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{WD_PLASTICITY_DIR}/data",
        tokenizer=f"{WD_PLASTICITY_DIR}/tokenizer",
        code=code("core", "shards"),
    output:
        directory(f"{WD_PLASTICITY_DIR}/shards"),
    log:
        f"{WD_PLASTICITY_DIR}/logs/shards.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_shards.tsv"
    params:
        # the files' newlines separate the documents already; without EOS the shards hold the
        # ids of the whole text, as when it was tokenized in one piece
        eos="no",
    shell:
        "python -m methods.core shards --source {input.data:q}/pretrain.txt --val-source {input.data:q}/val.txt "
        "--tokenizer {input.tokenizer:q} --eos {params.eos} --out {output:q} > {log:q} 2>&1"


rule wd_plasticity_pretrain:
    """One base model at weight decay λ; resumes from its checkpoint after a crash."""
    input:
        shards=f"{WD_PLASTICITY_DIR}/shards",
        tokenizer=f"{WD_PLASTICITY_DIR}/tokenizer",
        code=code("wd_plasticity", "pretrain"),
    output:
        directory(f"{WD_PLASTICITY_DIR}/base/wd{{wd}}_s{{seed}}"),
    log:
        f"{WD_PLASTICITY_DIR}/logs/pretrain/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_pretrain__wd{{wd}}_s{{seed}}.tsv"
    wildcard_constraints:
        wd=r"[0-9.]+(e-?[0-9]+)?",
    resources:
        **sized(wd_plasticity_pretrain_job),
    params:
        runtime=runtime_of(wd_plasticity_pretrain_job),
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "pretrain")),
        ckpt=f"{WD_PLASTICITY_DIR}/checkpoints/base_wd{{wd}}_s{{seed}}.pt",
        launch=launcher,  # python, or torchrun over the job's GPUs (common.smk)
    shell:
        "{params.launch} -m methods.wd_plasticity pretrain --config {params.cfg:q} --weight-decay {wildcards.wd:q} --seed {wildcards.seed:q} "
        "--shards {input.shards:q} --tokenizer {input.tokenizer:q} --checkpoint {params.ckpt:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule wd_plasticity_finetune:
    """SFT of one base on one task over the LR grid (λ_ft fixed); keeps the dev-best run."""
    input:
        base=f"{WD_PLASTICITY_DIR}/base/wd{{wd}}_s{{seed}}",
        data=f"{WD_PLASTICITY_DIR}/data",
        code=code("wd_plasticity", "finetune"),
    output:
        model=directory(f"{WD_PLASTICITY_DIR}/ft/wd{{wd}}_s{{seed}}/{{task}}"),
        metrics=f"{WD_PLASTICITY_DIR}/ft/wd{{wd}}_s{{seed}}/{{task}}.json",
    log:
        f"{WD_PLASTICITY_DIR}/logs/finetune/wd{{wd}}_s{{seed}}_{{task}}.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_finetune__wd{{wd}}_s{{seed}}_{{task}}.tsv"
    wildcard_constraints:
        wd=r"[0-9.]+(e-?[0-9]+)?",
        task=r"[A-Za-z][A-Za-z0-9]*",
    resources:
        **sized(wd_plasticity_finetune_job),
    params:
        runtime=runtime_of(wd_plasticity_finetune_job),
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "finetune")),
    shell:
        "python -m methods.wd_plasticity finetune --config {params.cfg:q} --base {input.base:q} "
        "--task-dir {input.data:q}/tasks/{wildcards.task:q} --seed {wildcards.seed:q} "
        "--out {output.model:q} --metrics {output.metrics:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule wd_plasticity_lm_eval_tasks:
    """Our downstream test sets as lm-eval task YAMLs (loglikelihood + generation per task)."""
    input:
        data=f"{WD_PLASTICITY_DIR}/data",
        code=code("wd_plasticity", "export-tasks"),
    output:
        directory(f"{WD_PLASTICITY_DIR}/lm_eval_tasks"),
    log:
        f"{WD_PLASTICITY_DIR}/logs/lm_eval_tasks.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_lm_eval_tasks.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "eval")),
        tasks=lambda wc: shell_words(wd_plasticity_tasks(wc.scale)),
    shell:
        "python -m methods.wd_plasticity export-tasks --config {params.cfg:q} --data {input.data:q} --tasks {params.tasks} "
        "--out {output:q} > {log:q} 2>&1"


rule wd_plasticity_evaluate:
    """lm-eval the base and its fine-tuned models (one per task) on the test split."""
    input:
        base=f"{WD_PLASTICITY_DIR}/base/wd{{wd}}_s{{seed}}",
        tasks=f"{WD_PLASTICITY_DIR}/lm_eval_tasks",
        ft=lambda wc: wd_plasticity_finetuned(wc, "model"),
        ft_metrics=lambda wc: wd_plasticity_finetuned(wc, "metrics"),
        code=code("wd_plasticity", "evaluate"),
    output:
        f"{WD_PLASTICITY_DIR}/eval/wd{{wd}}_s{{seed}}.json",
    log:
        f"{WD_PLASTICITY_DIR}/logs/eval/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_evaluate__wd{{wd}}_s{{seed}}.tsv"
    wildcard_constraints:
        wd=r"[0-9.]+(e-?[0-9]+)?",
    resources:
        **sized(wd_plasticity_evaluate_job),
    params:
        runtime=runtime_of(wd_plasticity_evaluate_job),
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "eval")),
        tasks=lambda wc: shell_words(wd_plasticity_tasks(wc.scale)),
    shell:
        "python -m methods.wd_plasticity evaluate --config {params.cfg:q} --base {input.base:q} --tasks-dir {input.tasks:q} "
        "--tasks {params.tasks} "
        "--ft-dirs {input.ft:q} --ft-metrics {input.ft_metrics:q} --weight-decay {wildcards.wd:q} "
        "--seed {wildcards.seed:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule wd_plasticity_probes:
    """Linear separability, attention norms / effective rank, and the train-val gap of a base."""
    input:
        base=f"{WD_PLASTICITY_DIR}/base/wd{{wd}}_s{{seed}}",
        data=f"{WD_PLASTICITY_DIR}/data",
        shards=f"{WD_PLASTICITY_DIR}/shards",
        code=code("wd_plasticity", "probes"),
    output:
        f"{WD_PLASTICITY_DIR}/probes/wd{{wd}}_s{{seed}}.json",
    log:
        f"{WD_PLASTICITY_DIR}/logs/probes/wd{{wd}}_s{{seed}}.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_probes__wd{{wd}}_s{{seed}}.tsv"
    wildcard_constraints:
        wd=r"[0-9.]+(e-?[0-9]+)?",
    resources:
        **sized(wd_plasticity_probes_job),
    params:
        runtime=runtime_of(wd_plasticity_probes_job),
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "probes")),
        seq_len=lambda wc: hp(wc.scale, "wd_plasticity", "pretrain", "seq_len"),
    shell:
        "python -m methods.wd_plasticity probes --config {params.cfg:q} --base {input.base:q} --data {input.data:q} "
        "--shards {input.shards:q} "
        "--seq-len {params.seq_len} --weight-decay {wildcards.wd:q} --seed {wildcards.seed:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule wd_plasticity_aggregate:
    """The sweep table and the claim metrics (summary.json, read by the generic claims rule)."""
    input:
        bases=lambda wc: wd_plasticity_per_base(wc.scale, "base"),
        probes=lambda wc: wd_plasticity_per_base(wc.scale, "probes"),
        evals=lambda wc: wd_plasticity_per_base(wc.scale, "eval"),
        code=code("wd_plasticity", "aggregate"),
    output:
        table=f"{WD_PLASTICITY_DIR}/table.csv",
        summary=f"{WD_PLASTICITY_DIR}/summary.json",
    log:
        f"{WD_PLASTICITY_DIR}/logs/aggregate.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_aggregate.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "wd_plasticity", "analysis")),
    shell:
        "python -m methods.wd_plasticity aggregate --config {params.cfg:q} --bases {input.bases:q} --probes {input.probes:q} "
        "--evals {input.evals:q} --table {output.table:q} --summary {output.summary:q} > {log:q} 2>&1"


rule wd_plasticity_figure:
    input:
        table=f"{WD_PLASTICITY_DIR}/table.csv",
        code=code("wd_plasticity", "figure"),
    output:
        fig=report(
            f"{WD_PLASTICITY_DIR}/figures/plasticity.png",
            caption="../../methods/wd_plasticity/report.rst",
            category="wd_plasticity",
            labels={"scale": "{scale}", "figure": "plasticity sweep"},
        ),
        caption=f"{WD_PLASTICITY_DIR}/figures/plasticity.caption.txt",
    log:
        f"{WD_PLASTICITY_DIR}/logs/figure.log",
    benchmark:
        f"{WD_PLASTICITY_DIR}/benchmarks/wd_plasticity_figure.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.wd_plasticity figure --table {input.table:q} --out {output.fig:q} > {log:q} 2>&1"


FIGURES["wd_plasticity"] = lambda scale: [f"{RESULTS}/{scale}/wd_plasticity/figures/plasticity.png"]
