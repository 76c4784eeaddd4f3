# UniScale (arXiv 2605.30898): offline replay table over (model x TTS) arms of the shared model pool
# (workflow/rules/model_pool.smk, included before this file), LinUCB and baselines, regret curves,
# Pareto frontiers, claims C1-C4 (methods/uniscale/).
include: "helpers/uniscale.smk"  # its GPU job sizer


UNISCALE_DIR = f"{RESULTS}/{{scale}}/uniscale"


rule uniscale_queries:
    """Benchmark queries (paper scale: MATH-500 / AIME from the hub) when `uniscale.queries` is set."""
    input:
        code=code("uniscale", "queries"),
    output:
        directory(f"{UNISCALE_DIR}/queries"),
    log:
        f"{UNISCALE_DIR}/logs/queries.log",
    benchmark:
        f"{UNISCALE_DIR}/benchmarks/uniscale_queries.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "uniscale", "queries")),
    shell:
        "python -m methods.uniscale queries --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule uniscale_build_table:
    """Offline replay table: every (query, model, TTS setting) run once."""
    input:
        members=lambda wc: model_pool_members(wc.scale),
        verifier=f"{MODEL_POOL_DIR}/verifier",
        costs=f"{MODEL_POOL_DIR}/pool_costs.json",
        data=uniscale_queries_dir,
        code=code("uniscale", "table"),
    output:
        f"{UNISCALE_DIR}/table.parquet",
    log:
        f"{UNISCALE_DIR}/logs/table.log",
    benchmark:
        f"{UNISCALE_DIR}/benchmarks/uniscale_build_table.tsv"
    resources:
        **sized(uniscale_build_table_job),
    params:
        runtime=runtime_of(uniscale_build_table_job),
        cfg=lambda wc: as_json(hp(wc.scale, "uniscale", "table")),
    shell:
        "python -m methods.uniscale table --config {params.cfg:q} --members {input.members:q} "
        "--verifier {input.verifier:q} --costs {input.costs:q} --data {input.data:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule uniscale_analyze:
    """All bandit runs (policies x weights x seeds + the dynamic run), claim metrics, figures."""
    input:
        table=f"{UNISCALE_DIR}/table.parquet",
        data=uniscale_queries_dir,
        costs=f"{MODEL_POOL_DIR}/pool_costs.json",
        code=code("uniscale", "analyze"),
    output:
        runs=f"{UNISCALE_DIR}/runs.json",
        summary=f"{UNISCALE_DIR}/summary.json",
        fig_regret=report(
            f"{UNISCALE_DIR}/figures/regret.png",
            caption="../../methods/uniscale/report.rst",
            category="uniscale",
            labels={"scale": "{scale}", "figure": "regret curves"},
        ),
        fig_pareto=report(
            f"{UNISCALE_DIR}/figures/pareto.png",
            caption="../../methods/uniscale/report.rst",
            category="uniscale",
            labels={"scale": "{scale}", "figure": "Pareto frontiers"},
        ),
    log:
        f"{UNISCALE_DIR}/logs/analyze.log",
    benchmark:
        f"{UNISCALE_DIR}/benchmarks/uniscale_analyze.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "uniscale", "bandit")),
    shell:
        "python -m methods.uniscale analyze --config {params.cfg:q} --table {input.table:q} --data {input.data:q} "
        "--costs {input.costs:q} --runs {output.runs:q} --summary {output.summary:q} "
        "--fig_regret {output.fig_regret:q} --fig_pareto {output.fig_pareto:q} > {log:q} 2>&1"


FIGURES["uniscale"] = lambda scale: [
    f"{RESULTS}/{scale}/uniscale/figures/regret.png",
    f"{RESULTS}/{scale}/uniscale/figures/pareto.png",
]
