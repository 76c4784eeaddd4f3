# DIBJudge (arXiv 2603.10351): synthetic languages with a translationese signature, a pairwise
# reward-model judge trained plain (SFT) or with DIBJudge's branches and its ablations, bias /
# accuracy / dependence metrics, figure and claims C1-C4 (methods/dibjudge/).
include: "helpers/dibjudge.smk"  # its config helpers and GPU job sizers


DIBJUDGE_DIR = f"{RESULTS}/{{scale}}/dibjudge"


rule dibjudge_data:
    """Train / ID / Bias Suite / adversarial pairs and their proxy labels (length, NLL, TTR bins):
    synthetic languages, or at paper scale the hub datasets with the judge LM's round-trip
    translations and NLLs (methods/dibjudge/hub_data.py)."""
    input:
        code=code("dibjudge", "data"),
    output:
        directory(f"{DIBJUDGE_DIR}/data"),
    log:
        f"{DIBJUDGE_DIR}/logs/data.log",
    benchmark:
        f"{DIBJUDGE_DIR}/benchmarks/dibjudge_data.tsv"
    resources:
        **sized(dibjudge_data_job),
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "dibjudge", "data")),
        hub=lambda wc: as_json(hp(wc.scale, "dibjudge", "train")["hub"]),
        runtime=runtime_of(dibjudge_data_job),
    shell:
        "python -m methods.dibjudge data --config {params.cfg:q} --hub {params.hub:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dibjudge_train:
    """Train one judge variant per seed, then evaluate it and probe its robust channel."""
    input:
        data=f"{DIBJUDGE_DIR}/data",
        code=code("dibjudge", "train"),
    output:
        f"{DIBJUDGE_DIR}/metrics_{{variant}}.json",
    log:
        f"{DIBJUDGE_DIR}/logs/train_{{variant}}.log",
    benchmark:
        f"{DIBJUDGE_DIR}/benchmarks/dibjudge_train__{{variant}}.tsv"
    wildcard_constraints:
        variant="sft|dib_vib|dib_vq|no_dis|no_proxy|no_bottleneck",
    resources:
        **sized(dibjudge_train_job),
    params:
        runtime=runtime_of(dibjudge_train_job),
        cfg=lambda wc: as_json(hp(wc.scale, "dibjudge", "train")),
        ckpt=f"{DIBJUDGE_DIR}/ckpt",
    shell:
        "python -m methods.dibjudge train --config {params.cfg:q} --variant {wildcards.variant:q} "
        "--data {input.data:q} --ckpt {params.ckpt:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule dibjudge_report:
    """Claim metrics (summary.json), the variant table and the bias figure."""
    input:
        metrics=lambda wc: dibjudge_metrics(wc.scale),
        code=code("dibjudge", "report"),
    output:
        table=f"{DIBJUDGE_DIR}/table.md",
        summary=f"{DIBJUDGE_DIR}/summary.json",
        figure=report(
            f"{DIBJUDGE_DIR}/figures/bias.png",
            caption="../../methods/dibjudge/report.rst",
            category="dibjudge",
            labels={"scale": "{scale}", "figure": "translationese bias per variant"},
        ),
    log:
        f"{DIBJUDGE_DIR}/logs/report.log",
    benchmark:
        f"{DIBJUDGE_DIR}/benchmarks/dibjudge_report.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "dibjudge", "report")),
    shell:
        "python -m methods.dibjudge report --config {params.cfg:q} --metrics {input.metrics:q} "
        "--table {output.table:q} --summary {output.summary:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["dibjudge"] = lambda scale: [f"{RESULTS}/{scale}/dibjudge/figures/bias.png"]
