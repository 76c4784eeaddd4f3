# DIBJudge (arXiv 2603.10351): synthetic languages with a translationese signature, a pairwise
# reward-model judge trained plain (SFT) or with DIBJudge's branches and its ablations, bias /
# accuracy / dependence metrics, figure and claims C1-C4 (methods/dibjudge/).
DJ = f"{RESULTS}/{{scale}}/dibjudge"


wildcard_constraints:
    variant="sft|dib_vib|dib_vq|no_dis|no_proxy|no_bottleneck",


rule dj_data:
    """Train / ID / Bias Suite / adversarial pairs and their proxy labels (length, NLL, TTR bins)."""
    input:
        code=code("dibjudge", "data"),
    output:
        directory(f"{DJ}/data"),
    log:
        f"{DJ}/logs/data.log",
    benchmark:
        f"{DJ}/benchmarks/dj_data.tsv"
    params:
        cfg=lambda wc: as_json(dj(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.dibjudge data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule dj_train:
    """Train one judge variant per seed, then evaluate it and probe its robust channel."""
    input:
        data=f"{DJ}/data",
        code=code("dibjudge", "train"),
    output:
        f"{DJ}/metrics_{{variant}}.json",
    log:
        f"{DJ}/logs/train_{{variant}}.log",
    benchmark:
        f"{DJ}/benchmarks/dj_train__{{variant}}.tsv"
    params:
        runtime=runtime_of(dj_train_job),
        cfg=lambda wc: as_json(dj(wc.scale, "train")),
        ckpt=f"{DJ}/ckpt",
    threads: 1
    conda:
        conda_env
    resources:
        **sized(dj_train_job),
    shell:
        "python -m methods.dibjudge train --config {params.cfg:q} --variant {wildcards.variant} "
        "--data {input.data} --ckpt {params.ckpt} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule dj_report:
    """Claim metrics (summary.json), the variant table and the bias figure."""
    input:
        metrics=lambda wc: dj_metrics(wc.scale),
        code=code("dibjudge", "report"),
    output:
        table=f"{DJ}/table.md",
        summary=f"{DJ}/summary.json",
        figure=report(
            f"{DJ}/figures/bias.png",
            caption="../report/dibjudge.rst",
            category="dibjudge",
            labels={"scale": "{scale}", "figure": "translationese bias per variant"},
        ),
    log:
        f"{DJ}/logs/report.log",
    benchmark:
        f"{DJ}/benchmarks/dj_report.tsv"
    params:
        cfg=lambda wc: as_json(dj(wc.scale, "report")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.dibjudge report --config {params.cfg:q} --metrics {input.metrics} "
        "--table {output.table} --summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["dibjudge"] = lambda scale: [f"{RESULTS}/{scale}/dibjudge/figures/bias.png"]
