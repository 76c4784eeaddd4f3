# ASAG (arXiv 2606.15070): synthetic over-thinking traces, a tiny reasoning model, greedy decoding
# under vanilla / NoThinking / DEER / ASAG (+ ablations), table, figure and claims (methods/asag/).
AS = f"{RESULTS}/{{scale}}/asag"


wildcard_constraints:
    policy="[a-z0-9_]+",


rule asag_data:
    """Synthetic problems and over-thinking traces (train) and held-out problems (test)."""
    input:
        code=code("asag", "data"),
    output:
        directory(f"{AS}/data"),
    log:
        f"{AS}/logs/data.log",
    benchmark:
        f"{AS}/benchmarks/asag_data.tsv"
    params:
        cfg=lambda wc: as_json(asag(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.asag data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule asag_train:
    """The tiny reasoning model (paper scale: records the hub LRM, trains nothing)."""
    input:
        data=f"{AS}/data",
        code=code("asag", "train"),
    output:
        directory(f"{AS}/model"),
    log:
        f"{AS}/logs/train.log",
    benchmark:
        f"{AS}/benchmarks/asag_train.tsv"
    params:
        runtime=runtime_of(asag_train_job),
        cfg=lambda wc: as_json(asag(wc.scale, "train")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(asag_train_job),
    shell:
        "python -m methods.asag train --config {params.cfg:q} --data {input.data} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule asag_decode:
    """Greedy decoding of the test problems under one policy (vanilla, DEER, ASAG, ...)."""
    input:
        model=f"{AS}/model",
        data=f"{AS}/data",
        code=code("asag", "decode"),
    output:
        f"{AS}/runs/{{policy}}.jsonl",
    log:
        f"{AS}/logs/decode/{{policy}}.log",
    benchmark:
        f"{AS}/benchmarks/asag_decode__{{policy}}.tsv"
    params:
        runtime=runtime_of(asag_decode_job),
        cfg=lambda wc: as_json(asag(wc.scale, "decode")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(asag_decode_job),
    shell:
        "python -m methods.asag decode --config {params.cfg:q} --model {input.model} --data {input.data} "
        "--policy {wildcards.policy} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule asag_report:
    """Acc / Len / CR / exits per policy, the pre-study, claim metrics and the figure."""
    input:
        runs=lambda wc: asag_runs(wc.scale),
        code=code("asag", "report"),
    output:
        table=f"{AS}/table.csv",
        summary=f"{AS}/summary.json",
        figure=report(
            f"{AS}/figures/acc_vs_tokens.png",
            caption="../report/asag.rst",
            category="asag",
            labels={"scale": "{scale}", "figure": "accuracy vs tokens, entropy change"},
        ),
        caption=f"{AS}/figures/acc_vs_tokens.caption.txt",
    log:
        f"{AS}/logs/report.log",
    benchmark:
        f"{AS}/benchmarks/asag_report.tsv"
    params:
        cfg=lambda wc: as_json(asag(wc.scale, "analysis")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.asag report --config {params.cfg:q} --runs {input.runs} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["asag"] = lambda scale: [f"{RESULTS}/{scale}/asag/figures/acc_vs_tokens.png"]
