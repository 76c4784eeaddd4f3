# ReMoE (arXiv 2605.27081): domain-switching corpus → tiny MoE-Llama pre-training → gate-only
# fine-tunes (ReMoE, CE-only control, w/o trust) → routing traces → EOR, PPL, expert-cache
# simulation, table, figure and claims 1–5 (methods/remoe/claims.yaml). Paper scale (pretrain.hub_id
# set): the released MoE's routers are the base, fine-tuned on hub.train_dataset conversations; the
# second MoE (hub.eor_model_id) gets the ReMoE fine-tune and traces for EOR; lm-eval on every checkpoint.
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
        "python -m methods.remoe data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule remoe_hub_data:
    """Paper scale: the first hub.n_train conversations of hub.train_dataset (fine-tuning) and the
    next hub.n_eval (held out), as chat messages."""
    input:
        code=code("remoe", "hub_data"),
    output:
        directory(f"{REMOE_DIR}/data/hub"),
    log:
        f"{REMOE_DIR}/logs/hub_data.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_hub_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "hub")),
    shell:
        "python -m methods.remoe hub_data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule remoe_pretrain:
    """Tiny MoE-Llama (core MoE layer + shared expert), CE + Switch balancing loss (paper scale:
    the released MoE's routers, recorded as they are)."""
    input:
        data=lambda wc: remoe_data_path(wc.scale),
        code=code("remoe", "pretrain"),
    output:
        ckpt=f"{REMOE_DIR}/ckpt/base.pt",
        log_json=f"{REMOE_DIR}/logs/pretrain.jsonl",
    log:
        f"{REMOE_DIR}/logs/pretrain.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_pretrain.tsv"
    resources:
        **sized(remoe_pretrain_job),
    params:
        runtime=runtime_of(remoe_pretrain_job),
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "pretrain")),
    shell:
        "python -m methods.remoe pretrain --config {params.cfg:q} --data {input.data:q} "
        "--out {output.ckpt:q} --log_json {output.log_json:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_finetune:
    """Gate-only fine-tune of one variant and seed (router weights trainable, everything else frozen)."""
    input:
        base=f"{REMOE_DIR}/ckpt/base.pt",
        data=lambda wc: remoe_data_path(wc.scale),
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
    resources:
        **sized(remoe_finetune_job),
    params:
        runtime=runtime_of(remoe_finetune_job),
        cfg=lambda wc: as_json(remoe_finetune_cfg(wc.scale, wc.rm_variant, wc.seed)),
    shell:
        "python -m methods.remoe finetune --config {params.cfg:q} --base {input.base:q} "
        "--data {input.data:q} --out {output.ckpt:q} --log_json {output.log_json:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_trace:
    """Per checkpoint: top-K expert sets per layer and token on held-out documents, and PPL."""
    input:
        ckpts=lambda wc: remoe_checkpoints(wc.scale),
        data=lambda wc: remoe_data_path(wc.scale),
        code=code("remoe", "trace"),
    output:
        directory(f"{REMOE_DIR}/traces"),
    log:
        f"{REMOE_DIR}/logs/trace.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_trace.tsv"
    resources:
        **sized(remoe_trace_job),
    params:
        runtime=runtime_of(remoe_trace_job),
        cfg=lambda wc: as_json(remoe_trace_cfg(wc.scale)),
    shell:
        "python -m methods.remoe trace --config {params.cfg:q} --ckpts {input.ckpts:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_eor_pretrain:
    """Paper scale: the second MoE's (hub.eor_model_id) routers as they are."""
    input:
        data=lambda wc: remoe_data_path(wc.scale),
        code=code("remoe", "pretrain"),
    output:
        ckpt=f"{REMOE_DIR}/eor_model/ckpt/base.pt",
        log_json=f"{REMOE_DIR}/eor_model/logs/pretrain.jsonl",
    log:
        f"{REMOE_DIR}/eor_model/logs/pretrain.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_eor_pretrain.tsv"
    resources:
        **sized(remoe_eor_pretrain_job),
    params:
        runtime=runtime_of(remoe_eor_pretrain_job),
        cfg=lambda wc: as_json(remoe_eor_pretrain_cfg(wc.scale)),
    shell:
        "python -m methods.remoe pretrain --config {params.cfg:q} --data {input.data:q} "
        "--out {output.ckpt:q} --log_json {output.log_json:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_eor_finetune:
    """Paper scale: the second MoE's gate-only fine-tune, one variant and seed."""
    input:
        base=f"{REMOE_DIR}/eor_model/ckpt/base.pt",
        data=lambda wc: remoe_data_path(wc.scale),
        code=code("remoe", "finetune"),
    output:
        ckpt=f"{REMOE_DIR}/eor_model/ckpt/finetuned/{{rm_variant}}_s{{seed}}.pt",
        log_json=f"{REMOE_DIR}/eor_model/logs/finetune_{{rm_variant}}_s{{seed}}.jsonl",
    log:
        f"{REMOE_DIR}/eor_model/logs/finetune_{{rm_variant}}_s{{seed}}.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_eor_finetune__{{rm_variant}}_s{{seed}}.tsv"
    wildcard_constraints:
        rm_variant=r"[a-z][a-z0-9_]*",
        seed=r"\d+",
    resources:
        **sized(remoe_eor_finetune_job),
    params:
        runtime=runtime_of(remoe_eor_finetune_job),
        cfg=lambda wc: as_json(remoe_finetune_cfg(wc.scale, wc.rm_variant, wc.seed)),
    shell:
        "python -m methods.remoe finetune --config {params.cfg:q} --base {input.base:q} "
        "--data {input.data:q} --out {output.ckpt:q} --log_json {output.log_json:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_eor_trace:
    """Paper scale: the second MoE's routing traces (base and ReMoE fine-tunes) and PPL."""
    input:
        ckpts=lambda wc: remoe_eor_checkpoints(wc.scale),
        data=lambda wc: remoe_data_path(wc.scale),
        code=code("remoe", "trace"),
    output:
        directory(f"{REMOE_DIR}/eor_model/traces"),
    log:
        f"{REMOE_DIR}/eor_model/logs/trace.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_eor_trace.tsv"
    resources:
        **sized(remoe_eor_trace_job),
    params:
        runtime=runtime_of(remoe_eor_trace_job),
        cfg=lambda wc: as_json(remoe_trace_cfg(wc.scale)),
    shell:
        "python -m methods.remoe trace --config {params.cfg:q} --ckpts {input.ckpts:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_lm_eval:
    """Paper scale: hub.lm_eval_tasks (lm-eval) with the base's and each ReMoE fine-tune's routers."""
    input:
        ckpts=lambda wc: remoe_lm_eval_checkpoints(wc.scale),
        code=code("remoe", "lm_eval"),
    output:
        f"{REMOE_DIR}/lm_eval.json",
    log:
        f"{REMOE_DIR}/logs/lm_eval.log",
    benchmark:
        f"{REMOE_DIR}/benchmarks/remoe_lm_eval.tsv"
    resources:
        **sized(remoe_lm_eval_job),
    params:
        runtime=runtime_of(remoe_lm_eval_job),
        cfg=lambda wc: as_json(hp(wc.scale, "remoe", "hub")),
    shell:
        "python -m methods.remoe lm_eval --config {params.cfg:q} --ckpts {input.ckpts:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule remoe_analyze:
    """EOR, entropy, load CV, cache simulation (LRU/FIFO/Belady × capacity), Prop. 3.1 check
    (paper scale: also the second MoE's EOR and the lm-eval scores)."""
    input:
        unpack(lambda wc: remoe_analyze_inputs(wc.scale)),
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
        extra=lambda wc, input: remoe_analyze_args(wc, input),
    shell:
        "python -m methods.remoe analyze --config {params.cfg:q} --traces {input.traces:q} "
        "--table {output.table:q} --summary {output.summary:q} --figure {output.figure:q} {params.extra} > {log:q} 2>&1"


FIGURES["remoe"] = lambda scale: [f"{RESULTS}/{scale}/remoe/figures/eor_cache.png"]
