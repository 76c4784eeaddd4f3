# RaBitQCache (ICML 2026, arXiv 2606.31519): passkey / multi-key retrieval data, tiny Llamas, one
# per training seed of `rabitqcache.seeds` (paper scale: the hub model), captured decode-time
# q/K/V and RaBitQ estimator statistics (first seed's model), generation through the sparse
# attention for every selector and every model, lm-eval tasks with it (paper scale),
# table/figure and claims pooled over the models (methods/rabitqcache/, kernels/rabitq.py).
include: "helpers/rabitqcache.smk"  # its config helpers and GPU job sizers


RABITQCACHE_DIR = f"{RESULTS}/{{scale}}/rabitqcache"


rule rabitqcache_data:
    """Passkey / multi-key retrieval texts (train) and prompts (eval), word-level tokenizer."""
    input:
        code=code("rabitqcache", "data"),
    output:
        directory(f"{RABITQCACHE_DIR}/data"),
    log:
        f"{RABITQCACHE_DIR}/logs/data.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "rabitqcache", "data")),
    shell:
        "python -m methods.rabitqcache data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule rabitqcache_train:
    """The tiny retrieval Llama (2 heads × 64) of one training seed; paper scale: the hub model, copied."""
    input:
        data=f"{RABITQCACHE_DIR}/data",
        code=code("rabitqcache", "train"),
    output:
        directory(f"{RABITQCACHE_DIR}/models/s{{seed}}"),
    log:
        f"{RABITQCACHE_DIR}/logs/train_s{{seed}}.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_train__s{{seed}}.tsv"
    threads: TORCH_THREADS
    resources:
        **sized(rabitqcache_train_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(rabitqcache_train_job),
        cfg=lambda wc: as_json({**hp(wc.scale, "rabitqcache", "base"), "seed": int(wc.seed)}),
    shell:
        "python -m methods.rabitqcache train --config {params.cfg:q} --data {input.data:q} --out {output:q} "
        "--threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rabitqcache_capture:
    """Decode-time post-RoPE q/K/V, dense probabilities and prefill centroids per layer (the first
    seed's model)."""
    input:
        model=lambda wc: rabitqcache_model(wc.scale),
        data=f"{RABITQCACHE_DIR}/data",
        code=code("rabitqcache", "capture"),
    output:
        f"{RABITQCACHE_DIR}/capture.npz",
    log:
        f"{RABITQCACHE_DIR}/logs/capture.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_capture.tsv"
    resources:
        **sized(rabitqcache_capture_job),
    params:
        runtime=runtime_of(rabitqcache_capture_job),
        cfg=lambda wc: as_json(rabitqcache_with_method(wc.scale, "capture")),
    shell:
        "python -m methods.rabitqcache capture --config {params.cfg:q} --model {input.model:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rabitqcache_estimator:
    """Bias over random rotations, RMSE (centred vs not, FP vs INT4 query), bound coverage."""
    input:
        capture=f"{RABITQCACHE_DIR}/capture.npz",
        code=code("rabitqcache", "estimator"),
    output:
        f"{RABITQCACHE_DIR}/estimator.json",
    log:
        f"{RABITQCACHE_DIR}/logs/estimator.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_estimator.tsv"
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(rabitqcache_estimator_cfg(wc.scale)),
    shell:
        "python -m methods.rabitqcache estimator --config {params.cfg:q} --capture {input.capture:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rabitqcache_sparse:
    """Generation through dense, RaBitQ Top-p at several p, INT4-key Top-p, and oracle top-k,
    Quest, random at RaBitQ's budgets: recall, budget, output error, I/O, passkey EM; one model."""
    input:
        model=f"{RABITQCACHE_DIR}/models/s{{seed}}",
        data=f"{RABITQCACHE_DIR}/data",
        code=code("rabitqcache", "sparse"),
    output:
        f"{RABITQCACHE_DIR}/sparse/s{{seed}}.json",
    log:
        f"{RABITQCACHE_DIR}/logs/sparse_s{{seed}}.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_sparse__s{{seed}}.tsv"
    resources:
        **sized(rabitqcache_sparse_job),
    params:
        runtime=runtime_of(rabitqcache_sparse_job),
        cfg=lambda wc: as_json(rabitqcache_with_method(wc.scale, "sparse")),
    shell:
        "python -m methods.rabitqcache sparse --config {params.cfg:q} --model {input.model:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rabitqcache_lm_eval:
    """Paper scale: lm-eval tasks (LongBench / RULER) with the sparse attention attached."""
    input:
        model=lambda wc: rabitqcache_model(wc.scale),
        code=code("rabitqcache", "lm_eval"),
    output:
        f"{RABITQCACHE_DIR}/lm_eval.json",
    log:
        f"{RABITQCACHE_DIR}/logs/lm_eval.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_lm_eval.tsv"
    resources:
        **sized(rabitqcache_lm_eval_job),
    params:
        runtime=runtime_of(rabitqcache_lm_eval_job),
        cfg=lambda wc: as_json(rabitqcache_lm_eval_cfg(wc.scale)),
    shell:
        "python -m methods.rabitqcache lm_eval --config {params.cfg:q} --model {input.model:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule rabitqcache_report:
    """Table, claim metrics pooled over the models (summary.json) and the budget-vs-recall /
    accuracy-vs-p figure."""
    input:
        estimator=f"{RABITQCACHE_DIR}/estimator.json",
        sparse=lambda wc: rabitqcache_sparse_outputs(wc.scale),
        lm_eval=lambda wc: rabitqcache_lm_eval_outputs(wc.scale),
        code=code("rabitqcache", "report"),
    output:
        table=f"{RABITQCACHE_DIR}/table.csv",
        summary=f"{RABITQCACHE_DIR}/summary.json",
        figure=report(
            f"{RABITQCACHE_DIR}/figures/budget_vs_recall.png",
            caption="../../methods/rabitqcache/report.rst",
            category="rabitqcache",
            labels={"scale": "{scale}", "figure": "budget vs recall, accuracy vs p"},
        ),
    log:
        f"{RABITQCACHE_DIR}/logs/report.log",
    benchmark:
        f"{RABITQCACHE_DIR}/benchmarks/rabitqcache_report.tsv"
    params:
        cfg=lambda wc: as_json({"ref_p": hp(wc.scale, "rabitqcache", "sparse", "ref_p")}),
    shell:
        "python -m methods.rabitqcache report --config {params.cfg:q} --estimator {input.estimator:q} "
        "--sparse {input.sparse:q} --lm-eval {input.lm_eval:q} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


use rule rabitqcache_report as rabitqcache_look_report with:
    # sequential seeds (`looks.rabitqcache` in the scale file, workflow/rules/claims.smk): the same
    # report over the first looks[look] trained models
    input:
        estimator=f"{RABITQCACHE_DIR}/estimator.json",
        sparse=lambda wc: rabitqcache_sparse_outputs(wc.scale, look_seeds(wc.scale, "rabitqcache", wc.look)),
        lm_eval=lambda wc: rabitqcache_lm_eval_outputs(wc.scale),
        code=code("rabitqcache", "report"),
    output:
        table=f"{RABITQCACHE_DIR}/looks/{{look}}/table.csv",
        summary=f"{RABITQCACHE_DIR}/looks/{{look}}/summary.json",
        figure=report(
            f"{RABITQCACHE_DIR}/looks/{{look}}/figures/budget_vs_recall.png",
            caption="../../methods/rabitqcache/report.rst",
            category="rabitqcache",
            labels={"scale": "{scale}", "figure": "budget vs recall, accuracy vs p (look {look})"},
        ),
    log:
        f"{RABITQCACHE_DIR}/looks/{{look}}/logs/report.log",
    benchmark:
        f"{RABITQCACHE_DIR}/looks/{{look}}/benchmarks/rabitqcache_report.tsv"
    wildcard_constraints:
        look=r"\d+",


FIGURES["rabitqcache"] = lambda scale: [f"{final_dir(scale, 'rabitqcache')}/figures/budget_vs_recall.png"]
