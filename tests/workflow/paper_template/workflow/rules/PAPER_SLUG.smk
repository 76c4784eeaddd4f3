# PAPER_SLUG (a throw-away paper, tests/workflow/paper_template/): E[max of k uniforms] by
# Monte Carlo against k/(k+1), summary, claims (methods/PAPER_SLUG/).
PAPER_UPPER_DIR = f"{RESULTS}/{{scale}}/PAPER_SLUG"


rule PAPER_SLUG_estimate:
    """Monte Carlo mean of the max of k uniforms, its standard error and the figure."""
    input:
        code=code("PAPER_SLUG", "estimate"),
    output:
        summary=f"{PAPER_UPPER_DIR}/summary.json",
        figure=report(
            f"{PAPER_UPPER_DIR}/figures/max_uniform.png",
            caption="../../methods/PAPER_SLUG/report.rst",
            category="PAPER_SLUG",
            labels={"scale": "{scale}", "figure": "max of k uniforms"},
        ),
        caption=f"{PAPER_UPPER_DIR}/figures/max_uniform.caption.txt",
    log:
        f"{PAPER_UPPER_DIR}/logs/estimate.log",
    benchmark:
        f"{PAPER_UPPER_DIR}/benchmarks/PAPER_SLUG_estimate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "PAPER_SLUG")),
    shell:
        "python -m methods.PAPER_SLUG estimate --config {params.cfg:q} --summary {output.summary} "
        "--figure {output.figure} > {log} 2>&1"


FIGURES["PAPER_SLUG"] = lambda scale: [f"{RESULTS}/{scale}/PAPER_SLUG/figures/max_uniform.png"]
