# FusionRoute (arXiv 2601.05106): generated add/rev/brk/comp domains, three domain experts, a
# small router LM with a linear routing head trained by SFT (LM + mixture routing loss on
# expert-disagreement tokens) then complemented DPO, and exact-match evaluation of FusionRoute
# against every baseline (methods/fusionroute/). The pipeline runs once per replicate
# (`fusionroute.seeds`, under seed{s}/); `fusionroute_aggregate` pools the replicates into the
# claim metrics with Wilson intervals.
include: "helpers/fusionroute.smk"  # its config helpers and GPU job sizers


FUSIONROUTE_TOP = f"{RESULTS}/{{scale}}/fusionroute"
FUSIONROUTE_DIR = f"{FUSIONROUTE_TOP}/seed{{seed}}"


rule fusionroute_gen_data:
    """Train/test items of the four domains and the char tokenizer."""
    input:
        code=code("fusionroute", "data"),
    output:
        directory(f"{FUSIONROUTE_DIR}/data"),
    log:
        f"{FUSIONROUTE_DIR}/logs/gen_data.log",
    benchmark:
        f"{FUSIONROUTE_DIR}/benchmarks/fusionroute_gen_data.tsv"
    params:
        cfg=lambda wc: as_json(fusionroute_data_cfg(wc.scale, wc.seed)),
    shell:
        "python -m methods.fusionroute data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule fusionroute_train_expert:
    """One domain expert (90% its domain); at paper scale a pointer to its hub id."""
    input:
        data=f"{FUSIONROUTE_DIR}/data",
        code=code("fusionroute", "expert"),
    output:
        directory(f"{FUSIONROUTE_DIR}/experts/{{domain}}"),
    log:
        f"{FUSIONROUTE_DIR}/logs/expert_{{domain}}.log",
    benchmark:
        f"{FUSIONROUTE_DIR}/benchmarks/fusionroute_train_expert__{{domain}}.tsv"
    wildcard_constraints:
        domain="add|rev|brk",
    resources:
        **sized(fusionroute_train_expert_job),
    params:
        runtime=runtime_of(fusionroute_train_expert_job),
        cfg=lambda wc: as_json(fusionroute_cfg(wc.scale, "expert", wc.seed)),
        seed=lambda wc: fusionroute_train_seed(wc.seed),
    shell:
        "python -m methods.fusionroute expert --config {params.cfg:q} --domain {wildcards.domain:q} "
        "--seed {params.seed} --data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule fusionroute_sft_router:
    """Router SFT phase: next-token loss + mixture routing loss on informative positions."""
    input:
        data=f"{FUSIONROUTE_DIR}/data",
        experts=lambda wc: fusionroute_experts(wc.scale, wc.seed),
        code=code("fusionroute", "sft"),
    output:
        directory(f"{FUSIONROUTE_DIR}/ckpt/router_sft"),
    log:
        f"{FUSIONROUTE_DIR}/logs/sft_router.log",
    benchmark:
        f"{FUSIONROUTE_DIR}/benchmarks/fusionroute_sft_router.tsv"
    resources:
        **sized(fusionroute_sft_router_job),
    params:
        runtime=runtime_of(fusionroute_sft_router_job),
        cfg=lambda wc: as_json(fusionroute_cfg(wc.scale, "router", wc.seed)),
        seed=lambda wc: fusionroute_train_seed(wc.seed),
    shell:
        "python -m methods.fusionroute sft --config {params.cfg:q} --seed {params.seed} "
        "--data {input.data:q} --experts {input.experts:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule fusionroute_cdpo:
    """Preference pairs (gold vs SFT-FusionRoute's wrong output), then complemented DPO."""
    input:
        data=f"{FUSIONROUTE_DIR}/data",
        experts=lambda wc: fusionroute_experts(wc.scale, wc.seed),
        router=f"{FUSIONROUTE_DIR}/ckpt/router_sft",
        code=code("fusionroute", "cdpo"),
    output:
        router=directory(f"{FUSIONROUTE_DIR}/ckpt/router_cdpo"),
        prefs=f"{FUSIONROUTE_DIR}/data_prefs/prefs.jsonl",
    log:
        f"{FUSIONROUTE_DIR}/logs/cdpo.log",
    benchmark:
        f"{FUSIONROUTE_DIR}/benchmarks/fusionroute_cdpo.tsv"
    resources:
        **sized(fusionroute_cdpo_job),
    params:
        runtime=runtime_of(fusionroute_cdpo_job),
        cfg=lambda wc: as_json(fusionroute_cfg(wc.scale, "cdpo", wc.seed, eval=hp(wc.scale, "fusionroute", "eval"))),
    shell:
        "python -m methods.fusionroute cdpo --config {params.cfg:q} --data {input.data:q} "
        "--experts {input.experts:q} --router {input.router:q} --out {output.router:q} "
        "--prefs {output.prefs:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule fusionroute_eval:
    """Exact match of every system (per test prompt) and measured costs, one replicate."""
    input:
        data=f"{FUSIONROUTE_DIR}/data",
        experts=lambda wc: fusionroute_experts(wc.scale, wc.seed),
        sft=f"{FUSIONROUTE_DIR}/ckpt/router_sft",
        cdpo=f"{FUSIONROUTE_DIR}/ckpt/router_cdpo",
        code=code("fusionroute", "evaluate"),
    output:
        f"{FUSIONROUTE_DIR}/metrics.json",
    log:
        f"{FUSIONROUTE_DIR}/logs/eval.log",
    benchmark:
        f"{FUSIONROUTE_DIR}/benchmarks/fusionroute_eval.tsv"
    resources:
        **sized(fusionroute_eval_job),
    params:
        runtime=runtime_of(fusionroute_eval_job),
        cfg=lambda wc: as_json(fusionroute_cfg(wc.scale, "eval", wc.seed)),
    shell:
        "python -m methods.fusionroute evaluate --config {params.cfg:q} --data {input.data:q} "
        "--experts {input.experts:q} --sft {input.sft:q} --cdpo {input.cdpo:q} --out {output:q} "
        "--threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule fusionroute_aggregate:
    """The replicates pooled: claim metrics with Wilson intervals (summary.json), table and figure."""
    input:
        evals=lambda wc: fusionroute_evals(wc.scale),
        code=code("fusionroute", "aggregate"),
    output:
        summary=f"{FUSIONROUTE_TOP}/summary.json",
        table=f"{FUSIONROUTE_TOP}/table.md",
        figure=report(
            f"{FUSIONROUTE_TOP}/figures/em_by_domain.png",
            caption="../../methods/fusionroute/report.rst",
            category="fusionroute",
            labels={"scale": "{scale}", "figure": "exact match by domain"},
        ),
        caption=f"{FUSIONROUTE_TOP}/figures/em_by_domain.caption.txt",
    log:
        f"{FUSIONROUTE_TOP}/logs/aggregate.log",
    benchmark:
        f"{FUSIONROUTE_TOP}/benchmarks/fusionroute_aggregate.tsv"
    params:
        cfg=lambda wc: as_json({"seeds": hp(wc.scale, "fusionroute", "seeds")}),
    shell:
        "python -m methods.fusionroute aggregate --config {params.cfg:q} --evals {input.evals:q} "
        "--summary {output.summary:q} --table {output.table:q} --figure {output.figure:q} > {log:q} 2>&1"


FIGURES["fusionroute"] = lambda scale: [f"{RESULTS}/{scale}/fusionroute/figures/em_by_domain.png"]
