# The HTML report: every enabled paper's claims table, figures, run times and provenance.
# Figures are also flagged with report() in the papers' rules, for `snakemake --report`.


rule report:
    input:
        claims=lambda wc: [f"{RESULTS}/{wc.scale}/{p}/claims.json" for p in PAPERS],
        figures=lambda wc: [f for p in PAPERS for f in FIGURES[p](wc.scale)],
        code=code("core.report"),
    output:
        f"{REPORTS}/{{scale}}/index.html",
    log:
        f"{REPORTS}/{{scale}}/report.log",
    benchmark:
        f"{REPORTS}/{{scale}}/report.tsv"
    params:
        papers=lambda wc: shell_words(f"{RESULTS}/{wc.scale}/{p}" for p in PAPERS),
        scale=lambda wc: wc.scale,
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.core.report --scale {params.scale:q} --papers {params.papers} "
        "--out {output:q} > {log:q} 2>&1"


rule claims:
    """A paper's claims.yaml evaluated on its summary metrics: verdict per claim."""
    input:
        spec="methods/{paper}/claims.yaml",
        metrics=f"{RESULTS}/{{scale}}/{{paper}}/summary.json",
        code=code("core", "claims"),
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/claims.json",
    log:
        f"{RESULTS}/{{scale}}/{{paper}}/logs/claims.log",
    benchmark:
        f"{RESULTS}/{{scale}}/{{paper}}/benchmarks/claims.tsv"
    params:
        scale=lambda wc: wc.scale,
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m methods.core claims --claims {input.spec:q} --metrics {input.metrics:q} "
        "--scale {params.scale:q} --out {output:q} > {log:q} 2>&1"

