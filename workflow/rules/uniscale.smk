# The shared model pool (methods/model_pool/, outputs under results/{scale}/model_pool/ for other
# papers too) and UniScale (arXiv 2605.30898): offline replay table over (model x TTS) arms,
# LinUCB and baselines, regret curves, Pareto frontiers, claims C1-C4 (methods/uniscale/).
POOL = f"{RESULTS}/{{scale}}/model_pool"
US = f"{RESULTS}/{{scale}}/uniscale"


rule pool_data:
    """Task mixture (arith + rev with step scratchpads), held-out queries, char tokenizer."""
    input:
        code=code("model_pool", "data"),
    output:
        directory(f"{POOL}/data"),
    log:
        f"{POOL}/logs/data.log",
    benchmark:
        f"{POOL}/benchmarks/pool_data.tsv"
    params:
        cfg=lambda wc: as_json(us(wc.scale, "pool")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.model_pool data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule pool_train_member:
    """One pool member (paper scale: a pointer to its hub id)."""
    input:
        data=f"{POOL}/data",
        code=code("model_pool", "train"),
    output:
        directory(f"{POOL}/members/{{member}}"),
    log:
        f"{POOL}/logs/train_{{member}}.log",
    benchmark:
        f"{POOL}/benchmarks/pool_train_member__{{member}}.tsv"
    params:
        runtime=runtime_of(pool_train_member_job),
        cfg=lambda wc: as_json(us(wc.scale, "pool")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(pool_train_member_job),
    shell:
        "python -m methods.model_pool train --config {params.cfg:q} --member {wildcards.member} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule pool_train_verifier:
    """The process verifier (P(Y) at each step mark; exact step labels on corrupted gold scratchpads and
    on the policy members' own sampled scratchpads)."""
    input:
        data=f"{POOL}/data",
        members=lambda wc: pool_members(wc.scale),
        code=code("model_pool", "verifier"),
    output:
        directory(f"{POOL}/verifier"),
    log:
        f"{POOL}/logs/verifier.log",
    benchmark:
        f"{POOL}/benchmarks/pool_train_verifier.tsv"
    params:
        runtime=runtime_of(pool_train_verifier_job),
        cfg=lambda wc: as_json(us(wc.scale, "pool")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(pool_train_verifier_job),
    shell:
        "python -m methods.model_pool verifier --config {params.cfg:q} --data {input.data} --out {output} "
        "--members {input.members} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule pool_costs:
    """FLOPs/token (analytic, checked by FlopCounterMode) and measured wall time/token per member."""
    input:
        members=lambda wc: pool_members(wc.scale),
        verifier=f"{POOL}/verifier",
        code=code("model_pool", "costs"),
    output:
        f"{POOL}/pool_costs.json",
    log:
        f"{POOL}/logs/costs.log",
    benchmark:
        f"{POOL}/benchmarks/pool_costs.tsv"
    params:
        runtime=runtime_of(pool_costs_job),
        cfg=lambda wc: as_json(us(wc.scale, "pool")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(pool_costs_job),
    shell:
        "python -m methods.model_pool costs --config {params.cfg:q} --members {input.members} "
        "--verifier {input.verifier} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule us_build_table:
    """Offline replay table: every (query, model, TTS setting) run once."""
    input:
        members=lambda wc: pool_members(wc.scale),
        verifier=f"{POOL}/verifier",
        costs=f"{POOL}/pool_costs.json",
        data=f"{POOL}/data",
        code=code("uniscale", "table"),
    output:
        f"{US}/table.parquet",
    log:
        f"{US}/logs/table.log",
    benchmark:
        f"{US}/benchmarks/us_build_table.tsv"
    params:
        runtime=runtime_of(us_build_table_job),
        cfg=lambda wc: as_json(us(wc.scale, "table")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(us_build_table_job),
    shell:
        "python -m methods.uniscale table --config {params.cfg:q} --members {input.members} "
        "--verifier {input.verifier} --costs {input.costs} --data {input.data} --out {output} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule us_analyze:
    """All bandit runs (policies x weights x seeds + the dynamic run), claim metrics, figures."""
    input:
        table=f"{US}/table.parquet",
        data=f"{POOL}/data",
        costs=f"{POOL}/pool_costs.json",
        code=code("uniscale", "analyze"),
    output:
        runs=f"{US}/runs.json",
        summary=f"{US}/summary.json",
        fig_regret=report(
            f"{US}/figures/regret.png",
            caption="../report/uniscale.rst",
            category="uniscale",
            labels={"scale": "{scale}", "figure": "regret curves"},
        ),
        fig_pareto=report(
            f"{US}/figures/pareto.png",
            caption="../report/uniscale.rst",
            category="uniscale",
            labels={"scale": "{scale}", "figure": "Pareto frontiers"},
        ),
    log:
        f"{US}/logs/analyze.log",
    benchmark:
        f"{US}/benchmarks/us_analyze.tsv"
    params:
        cfg=lambda wc: as_json(us(wc.scale, "bandit")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.uniscale analyze --config {params.cfg:q} --table {input.table} --data {input.data} "
        "--costs {input.costs} --runs {output.runs} --summary {output.summary} "
        "--fig_regret {output.fig_regret} --fig_pareto {output.fig_pareto} > {log} 2>&1"


FIGURES["uniscale"] = lambda scale: [
    f"{RESULTS}/{scale}/uniscale/figures/regret.png",
    f"{RESULTS}/{scale}/uniscale/figures/pareto.png",
]
