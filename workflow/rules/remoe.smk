# ReMoE (arXiv 2605.27081): domain-switching corpus → tiny MoE-Llama pre-training → gate-only
# fine-tunes (ReMoE, CE-only control, w/o trust) → routing traces → EOR, PPL, expert-cache
# simulation, table, figure and claims 1–5 (methods/remoe/claims.yaml).
include: "helpers/remoe.smk"  # its config helpers and GPU job sizers
REMOE_DIR = f"{RESULTS}/{{scale}}/remoe"


rule remoe_data:
    """Domain-switching character corpus (train documents, held-out documents, domains)."""
    input:
        code=code("remoe", "data"),
    output:
        f"{REMOE_DIR}/data/corpus.npz",
    log:
        f"{REMOE_DIR}/logs/data.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "data")),
    shell:
        "python -m methods.remoe data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule remoe_pretrain:
    """Tiny MoE-Llama (core MoE layer + shared expert), CE + Switch balancing loss."""
    input:
        data=f"{REMOE_DIR}/data/corpus.npz",
        code=code("remoe", "pretrain"),
    output:
        ckpt=f"{REMOE_DIR}/ckpt/base.pt",
        log_json=f"{REMOE_DIR}/logs/pretrain.jsonl",
    log:
        f"{REMOE_DIR}/logs/pretrain.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_pretrain.tsv"
    params:
        runtime=runtime_of(remoe_pretrain_job),
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "pretrain")),
    resources:
        **sized(remoe_pretrain_job),
    shell:
        "python -m methods.remoe pretrain --config {params.cfg:q} --data {input.data} "
        "--out {output.ckpt} --log_json {output.log_json} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_finetune:
    """Gate-only fine-tune of one variant and seed (router weights trainable, everything else frozen)."""
    input:
        base=f"{REMOE_DIR}/ckpt/base.pt",
        data=f"{REMOE_DIR}/data/corpus.npz",
        code=code("remoe", "finetune"),
    output:
        ckpt=f"{REMOE_DIR}/ckpt/finetuned/{{rm_variant}}_s{{seed}}.pt",
        log_json=f"{REMOE_DIR}/logs/finetune_{{rm_variant}}_s{{seed}}.jsonl",
    log:
        f"{REMOE_DIR}/logs/finetune_{{rm_variant}}_s{{seed}}.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_finetune__{{rm_variant}}_s{{seed}}.tsv"
    wildcard_constraints:
        rm_variant=r"[a-z][a-z0-9_]*",
        seed=r"\d+",
    params:
        runtime=runtime_of(remoe_finetune_job),
        cfg=lambda wc: as_json(remoe_finetune_cfg(wc.scale, wc.rm_variant, wc.seed)),
    resources:
        **sized(remoe_finetune_job),
    shell:
        "python -m methods.remoe finetune --config {params.cfg:q} --base {input.base} "
        "--data {input.data} --out {output.ckpt} --log_json {output.log_json} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_trace:
    """Per checkpoint: top-K expert sets per layer and token on held-out documents, and PPL."""
    input:
        ckpts=lambda wc: remoe_checkpoints(wc.scale),
        data=f"{REMOE_DIR}/data/corpus.npz",
        code=code("remoe", "trace"),
    output:
        directory(f"{REMOE_DIR}/traces"),
    log:
        f"{REMOE_DIR}/logs/trace.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_trace.tsv"
    params:
        runtime=runtime_of(remoe_trace_job),
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "trace")),
    resources:
        **sized(remoe_trace_job),
    shell:
        "python -m methods.remoe trace --config {params.cfg:q} --ckpts {input.ckpts} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule remoe_analyze:
    """EOR, entropy, load CV, cache simulation (LRU/FIFO/Belady × capacity), Prop. 3.1 check."""
    input:
        traces=f"{REMOE_DIR}/traces",
        code=code("remoe", "analyze"),
    output:
        table=f"{REMOE_DIR}/table.csv",
        summary=f"{REMOE_DIR}/summary.json",
        figure=report(
            f"{REMOE_DIR}/figures/eor_cache.png",
            caption="../../methods/remoe/report.rst",
            category="remoe",
            labels={"scale": "{scale}", "figure": "EOR and expert fetches"},
        ),
    log:
        f"{REMOE_DIR}/logs/analyze.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_analyze.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "analysis")),
    shell:
        "python -m methods.remoe analyze --config {params.cfg:q} --traces {input.traces} "
        "--table {output.table} --summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["remoe"] = lambda scale: [f"{RESULTS}/{scale}/remoe/figures/eor_cache.png"]
