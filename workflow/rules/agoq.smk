# AGoQ (arXiv 2605.00539): the PCFG + arithmetic corpus, data-parallel training of each bit-policy
# variant over world_size real processes, gloo on CPU and nccl on GPUs (LAAQ saved-activation
# quantization; qgrad8 adds QuanGrad's 8-bit all-reduce and int8 gradient buffer), the
# gradient-collective / policy-bytes probe, then
# table, pipeline memory model, figure and claims A1–A6 (methods/agoq/).
include: "helpers/agoq.smk"  # its config helpers and GPU job sizers


AGOQ_DIR = f"{RESULTS}/{{scale}}/agoq"


rule agoq_data:
    """Corpus (train/val text) and the char tokenizer."""
    input:
        code=code("agoq", "data"),
    output:
        directory(f"{AGOQ_DIR}/data"),
    log:
        f"{AGOQ_DIR}/logs/data.log",
    benchmark:
        f"{AGOQ_DIR}/benchmarks/agoq_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "agoq", "data")),
    shell:
        "python -m methods.agoq data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule agoq_shards:
    """train.txt and val.txt tokenized once into on-disk shards (train/, val/) that the runs
    and the probe read by (seed, step): no step holds the corpus in memory."""
    input:
        data=f"{AGOQ_DIR}/data",
        code=code("core", "shards"),
    output:
        directory(f"{AGOQ_DIR}/shards"),
    log:
        f"{AGOQ_DIR}/logs/shards.log",
    benchmark:
        f"{AGOQ_DIR}/benchmarks/agoq_shards.tsv"
    params:
        # the files' newlines separate the documents already; without EOS the shards hold the
        # ids of the whole text, as when it was tokenized in one piece
        eos="no",
    shell:
        "python -m methods.core shards --source {input.data:q}/train.txt --val-source {input.data:q}/val.txt "
        "--tokenizer {input.data:q}/tokenizer --eos {params.eos} --out {output:q} > {log:q} 2>&1"


rule agoq_train:
    """One variant and seed, data-parallel: the job launches its world_size ranks itself (one GPU each on
    CUDA, process group nccl; gloo on CPU), with its own QuanGrad all-reduce (not torchrun/DDP)."""
    input:
        data=f"{AGOQ_DIR}/data",
        shards=f"{AGOQ_DIR}/shards",
        code=code("agoq", "train"),
    output:
        directory(f"{AGOQ_DIR}/runs/{{variant}}_s{{seed}}"),
    log:
        f"{AGOQ_DIR}/logs/train/{{variant}}_s{{seed}}.log",
    benchmark:
        f"{AGOQ_DIR}/benchmarks/agoq_train__{{variant}}_s{{seed}}.tsv"
    wildcard_constraints:
        variant="[a-z0-9_]+",
        seed=r"\d+",
    threads: TORCH_THREADS
    resources:
        **sized(agoq_train_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(agoq_train_job),
        cfg=lambda wc: as_json(agoq_run_cfg(wc.scale, wc.variant, wc.seed)),
    shell:
        "python -m methods.agoq train --config {params.cfg:q} --data {input.data:q} --shards {input.shards:q} "
        "--out {output:q} "
        "--threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


rule agoq_probe:
    """Gradient-collective errors over W simulated workers on the fp model; bytes of every policy."""
    input:
        model=lambda wc: agoq_probe_model(wc.scale),
        shards=f"{AGOQ_DIR}/shards",
        code=code("agoq", "probe"),
    output:
        f"{AGOQ_DIR}/probe.json",
    log:
        f"{AGOQ_DIR}/logs/probe.log",
    benchmark:
        f"{AGOQ_DIR}/benchmarks/agoq_probe.tsv"
    resources:
        **sized(agoq_probe_job),
    params:
        runtime=runtime_of(agoq_probe_job),
        cfg=lambda wc: as_json(agoq_probe_cfg(wc.scale)),
    shell:
        "python -m methods.agoq probe --config {params.cfg:q} --model {input.model:q} --shards {input.shards:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule agoq_aggregate:
    """Table, 1F1B stage-memory model, claim metrics (summary.json) and the figure."""
    input:
        runs=lambda wc: agoq_runs(wc.scale),
        probe=f"{AGOQ_DIR}/probe.json",
        code=code("agoq", "aggregate"),
    output:
        table=f"{AGOQ_DIR}/table.csv",
        pp_memory=f"{AGOQ_DIR}/pp_memory.csv",
        summary=f"{AGOQ_DIR}/summary.json",
        figure=report(
            f"{AGOQ_DIR}/figures/agoq.png",
            caption="../../methods/agoq/report.rst",
            category="agoq",
            labels={"scale": "{scale}", "figure": "convergence, activation bytes, all-reduce error, stage memory"},
        ),
        caption=f"{AGOQ_DIR}/figures/agoq.caption.txt",
    log:
        f"{AGOQ_DIR}/logs/aggregate.log",
    benchmark:
        f"{AGOQ_DIR}/benchmarks/agoq_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "agoq", "analysis")),
    shell:
        "python -m methods.agoq aggregate --config {params.cfg:q} --runs {input.runs:q} --probe {input.probe:q} "
        "--table {output.table:q} --pp-memory {output.pp_memory:q} --summary {output.summary:q} "
        "--figure {output.figure:q} > {log:q} 2>&1"


FIGURES["agoq"] = lambda scale: [f"{RESULTS}/{scale}/agoq/figures/agoq.png"]
