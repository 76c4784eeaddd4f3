# Claims: a paper's claims.yaml evaluated on its summary metrics (methods/core/claims.py), the
# only place a verdict is decided. Needs RESULTS, SCALES and code() (common.smk).
#
# Sequential seeds (methods/core/sequential.py): a paper listed under `looks:` in a scale file is
# looked at after each planned number of seeds. Its rules then write one summary per look,
# `<paper>/looks/<k>/summary.json`, from the first looks[k] seeds of its `seeds` list; the
# checkpoint claims_look evaluates it at that look's share of the error; the next look's seeds
# are asked for only while a headline claim is still undecided (inconclusive because the
# interval straddles or n < 3), up to the cap. claims.json is the claims of the last look run.
include: "helpers/claims.smk"  # looks_of, final_look, claims_metrics, look_args


checkpoint claims_look:
    """One planned look of a sequential paper: its claims on the seeds so far, at the look's level."""
    input:
        spec="methods/{paper}/claims.yaml",
        metrics=f"{RESULTS}/{{scale}}/{{paper}}/looks/{{look}}/summary.json",
        code=code("core", "claims"),
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/looks/{{look}}/claims.json",
    log:
        f"{RESULTS}/{{scale}}/{{paper}}/looks/{{look}}/logs/claims.log",
    benchmark:
        f"{RESULTS}/{{scale}}/{{paper}}/looks/{{look}}/benchmarks/claims_look.tsv"
    wildcard_constraints:
        look=r"\d+",
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        scale=lambda wc: wc.scale,
        looks=lambda wc: look_args(wc.scale, wc.paper, wc.look),
    shell:
        "python -m methods.core claims --claims {input.spec:q} --metrics {input.metrics:q} "
        "--scale {params.scale:q} {params.looks} --out {output:q} > {log:q} 2>&1"


rule claims:
    """A paper's claims.yaml evaluated on its summary metrics (for a sequential paper: those of
    its final look, at that look's level): verdict per claim."""
    input:
        spec="methods/{paper}/claims.yaml",
        metrics=claims_metrics,
        code=code("core", "claims"),
    output:
        f"{RESULTS}/{{scale}}/{{paper}}/claims.json",
    log:
        f"{RESULTS}/{{scale}}/{{paper}}/logs/claims.log",
    benchmark:
        f"{RESULTS}/{{scale}}/{{paper}}/benchmarks/claims.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        scale=lambda wc: wc.scale,
        looks=lambda wc: (
            ""
            if looks_of(wc.scale, wc.paper) is None
            else look_args(wc.scale, wc.paper, final_look(wc.scale, wc.paper))
        ),
    shell:
        "python -m methods.core claims --claims {input.spec:q} --metrics {input.metrics:q} "
        "--scale {params.scale:q} {params.looks} --out {output:q} > {log:q} 2>&1"
