# The HTML report: every enabled paper's claims table, figures, run times and provenance.
# Figures are also flagged with report() in the papers' rules, and each paper's claims table
# (rule claims_table), for `snakemake --report`.


rule report:
    input:
        claims=lambda wc: [f"{RESULTS}/{wc.scale}/{p}/claims.json" for p in PAPERS],
        figures=lambda wc: [f for p in PAPERS for f in FIGURES[p](wc.scale)],
        tables=lambda wc: [f"{RESULTS}/{wc.scale}/{p}/claims.html" for p in PAPERS],
        scale_config=f"{config['scales_dir']}/{{scale}}.yaml",
        code=code("core.report"),
    output:
        f"{REPORTS}/{{scale}}/index.html",
    log:
        f"{REPORTS}/{{scale}}/report.log",
    benchmark:
        f"{REPORTS}/{{scale}}/report.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        papers=lambda wc: shell_words(f"{RESULTS}/{wc.scale}/{p}" for p in PAPERS),
        scale=lambda wc: wc.scale,
    shell:
        "python -m methods.core.report --scale {params.scale:q} --papers {params.papers} "
        "--scale-config {input.scale_config:q} --out {output:q} > {log:q} 2>&1"


rule claims_table:
    """A paper's claims table as a page of its own, for `snakemake --report` (the HTML report
    shows the same table in its paper's section). A rule apart from `claims`, so that a change
    to the report's code does not rerun the claims checks."""
    input:
        claims=f"{RESULTS}/{{scale}}/{{paper}}/claims.json",
        code=code("core.report"),
    output:
        report(
            f"{RESULTS}/{{scale}}/{{paper}}/claims.html",
            caption="../report/claims.rst",
            category="{paper}",
            labels={"scale": "{scale}", "figure": "claims table"},
        ),
    log:
        f"{RESULTS}/{{scale}}/{{paper}}/logs/claims_table.log",
    benchmark:
        f"{RESULTS}/{{scale}}/{{paper}}/benchmarks/claims_table.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        paper_dir=lambda wc: f"{RESULTS}/{wc.scale}/{wc.paper}",
        scale=lambda wc: wc.scale,
    shell:
        "python -m methods.core.report --claims-only --scale {params.scale:q} "
        "--papers {params.paper_dir:q} --out {output:q} > {log:q} 2>&1"
