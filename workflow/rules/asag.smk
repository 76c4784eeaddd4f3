# ASAG (arXiv 2606.15070): synthetic over-thinking traces, a tiny reasoning model, greedy decoding
# under vanilla / NoThinking / DEER / ASAG (+ ablations), table, figure and claims (methods/asag/).
include: "helpers/asag.smk"  # its config helpers and GPU job sizers


ASAG_DIR = f"{RESULTS}/{{scale}}/asag"


rule asag_data:
    """Synthetic problems and over-thinking traces (train) and held-out problems (test); paper
    scale: the paper's benchmarks (`paper.benchmarks`) through `datasets`."""
    input:
        code=code("asag", "data"),
    output:
        directory(f"{ASAG_DIR}/data"),
    log:
        f"{ASAG_DIR}/logs/data.log",
    benchmark:
        f"{ASAG_DIR}/benchmarks/asag_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "asag", "data")),
        paper=lambda wc: as_json(hp(wc.scale, "asag", "paper")),
    shell:
        "python -m methods.asag data --config {params.cfg:q} --paper {params.paper:q} --out {output:q} > {log:q} 2>&1"


rule asag_train:
    """The tiny reasoning model (paper scale: records the hub LRM, trains nothing)."""
    input:
        data=f"{ASAG_DIR}/data",
        code=code("asag", "train"),
    output:
        directory(f"{ASAG_DIR}/model"),
    log:
        f"{ASAG_DIR}/logs/train.log",
    benchmark:
        f"{ASAG_DIR}/benchmarks/asag_train.tsv"
    resources:
        **sized(asag_train_job),
    params:
        runtime=runtime_of(asag_train_job),
        cfg=lambda wc: as_json(hp(wc.scale, "asag", "train")),
    shell:
        "python -m methods.asag train --config {params.cfg:q} --data {input.data:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule asag_decode:
    """Greedy decoding of the test problems under one policy (vanilla, DEER, ASAG, ...); paper
    scale: every hub LRM of `paper.models` on the benchmarks (methods/asag/hub.py)."""
    input:
        model=f"{ASAG_DIR}/model",
        data=f"{ASAG_DIR}/data",
        code=code("asag", "decode"),
    output:
        f"{ASAG_DIR}/runs/{{policy}}.jsonl",
    log:
        f"{ASAG_DIR}/logs/decode/{{policy}}.log",
    benchmark:
        f"{ASAG_DIR}/benchmarks/asag_decode__{{policy}}.tsv"
    wildcard_constraints:
        policy="[a-z0-9_]+",
    resources:
        **sized(asag_decode_job),
    params:
        runtime=runtime_of(asag_decode_job),
        cfg=lambda wc: as_json(hp(wc.scale, "asag", "decode")),
        paper=lambda wc: as_json(hp(wc.scale, "asag", "paper")),
    shell:
        "python -m methods.asag decode --config {params.cfg:q} --paper {params.paper:q} --model {input.model:q} "
        "--data {input.data:q} --policy {wildcards.policy:q} --out {output:q} --threads {threads} "
        "--runtime {params.runtime:q} > {log:q} 2>&1"


rule asag_report:
    """Acc / Len / CR / exits per policy, the pre-study, claim metrics and the figure."""
    input:
        runs=lambda wc: asag_runs(wc.scale),
        model=f"{ASAG_DIR}/model",
        code=code("asag", "report"),
    output:
        table=f"{ASAG_DIR}/table.csv",
        summary=f"{ASAG_DIR}/summary.json",
        figure=report(
            f"{ASAG_DIR}/figures/acc_vs_tokens.png",
            caption="../../methods/asag/report.rst",
            category="asag",
            labels={"scale": "{scale}", "figure": "accuracy vs tokens, entropy change"},
        ),
        caption=f"{ASAG_DIR}/figures/acc_vs_tokens.caption.txt",
    log:
        f"{ASAG_DIR}/logs/report.log",
    benchmark:
        f"{ASAG_DIR}/benchmarks/asag_report.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "asag", "analysis")),
    shell:
        "python -m methods.asag report --config {params.cfg:q} --runs {input.runs:q} --model {input.model:q} "
        "--table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["asag"] = lambda scale: [f"{RESULTS}/{scale}/asag/figures/acc_vs_tokens.png"]
