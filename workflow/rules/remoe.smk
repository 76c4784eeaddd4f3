# ReMoE (arXiv 2605.27081): domain-switching corpus → tiny MoE-Llama pre-training → gate-only
# fine-tunes (ReMoE, CE-only control, w/o trust) → routing traces → EOR, PPL, expert-cache
# simulation, table, figure and claims 1–5 (methods/remoe/claims.yaml).
RM = f"{RESULTS}/{{scale}}/remoe"


rule remoe_data:
    """Domain-switching character corpus (train documents, held-out documents, domains)."""
    input:
        code=code("remoe", "data"),
    output:
        f"{RM}/data/corpus.npz",
    log:
        f"{RM}/logs/data.log",
    benchmark:
        f"{RM}/benchmarks/remoe_data.tsv"
    params:
        cfg=lambda wc: as_json(rm(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.remoe data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule remoe_pretrain:
    """Tiny MoE-Llama (core MoE layer + shared expert), CE + Switch balancing loss."""
    input:
        data=f"{RM}/data/corpus.npz",
        code=code("remoe", "pretrain"),
    output:
        ckpt=f"{RM}/ckpt/base.pt",
        log_json=f"{RM}/logs/pretrain.jsonl",
    log:
        f"{RM}/logs/pretrain.log",
    benchmark:
        f"{RM}/benchmarks/remoe_pretrain.tsv"
    params:
        runtime=runtime_of(remoe_pretrain_job),
        cfg=lambda wc: as_json(rm(wc.scale, "pretrain")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(remoe_pretrain_job),
    shell:
        "python -m methods.remoe pretrain --config {params.cfg:q} --data {input.data} "
        "--out {output.ckpt} --log_json {output.log_json} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_finetune:
    """Gate-only fine-tune of one variant (router weights trainable, everything else frozen)."""
    input:
        base=f"{RM}/ckpt/base.pt",
        data=f"{RM}/data/corpus.npz",
        code=code("remoe", "finetune"),
    output:
        ckpt=f"{RM}/ckpt/finetuned/{{rm_variant}}.pt",
        log_json=f"{RM}/logs/finetune_{{rm_variant}}.jsonl",
    log:
        f"{RM}/logs/finetune_{{rm_variant}}.log",
    benchmark:
        f"{RM}/benchmarks/remoe_finetune__{{rm_variant}}.tsv"
    wildcard_constraints:
        rm_variant=r"[a-z][a-z0-9_]*",
    params:
        runtime=runtime_of(remoe_finetune_job),
        cfg=lambda wc: as_json(rm_ft_cfg(wc.scale, wc.rm_variant)),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(remoe_finetune_job),
    shell:
        "python -m methods.remoe finetune --config {params.cfg:q} --base {input.base} "
        "--data {input.data} --out {output.ckpt} --log_json {output.log_json} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_trace:
    """Per checkpoint: top-K expert sets per layer and token on held-out documents, and PPL."""
    input:
        ckpts=lambda wc: rm_ckpts(wc.scale),
        data=f"{RM}/data/corpus.npz",
        code=code("remoe", "trace"),
    output:
        directory(f"{RM}/traces"),
    log:
        f"{RM}/logs/trace.log",
    benchmark:
        f"{RM}/benchmarks/remoe_trace.tsv"
    params:
        runtime=runtime_of(remoe_trace_job),
        cfg=lambda wc: as_json(rm(wc.scale, "trace")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(remoe_trace_job),
    shell:
        "python -m methods.remoe trace --config {params.cfg:q} --ckpts {input.ckpts} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_analyze:
    """EOR, entropy, load CV, cache simulation (LRU/FIFO/Belady × capacity), Prop. 3.1 check."""
    input:
        traces=f"{RM}/traces",
        code=code("remoe", "analyze"),
    output:
        table=f"{RM}/table.csv",
        summary=f"{RM}/summary.json",
        figure=report(
            f"{RM}/figures/eor_cache.png",
            caption="../report/remoe.rst",
            category="remoe",
            labels={"scale": "{scale}", "figure": "EOR and expert fetches"},
        ),
    log:
        f"{RM}/logs/analyze.log",
    benchmark:
        f"{RM}/benchmarks/remoe_analyze.tsv"
    params:
        cfg=lambda wc: as_json(rm(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.remoe analyze --config {params.cfg:q} --traces {input.traces} "
        "--table {output.table} --summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["remoe"] = lambda scale: [f"{RESULTS}/{scale}/remoe/figures/eor_cache.png"]
