# FusionRoute (arXiv 2601.05106): generated add/rev/brk/comp domains, three domain experts, a
# small router LM with a linear routing head trained by SFT (LM + mixture routing loss on
# expert-disagreement tokens) then complemented DPO, and exact-match evaluation of FusionRoute
# against every baseline (methods/fusionroute/).
FR = f"{RESULTS}/{{scale}}/fusionroute"


wildcard_constraints:
    domain="add|rev|brk",


rule fr_gen_data:
    """Train/test items of the four domains and the char tokenizer."""
    input:
        code=code("fusionroute", "data"),
    output:
        directory(f"{FR}/data"),
    log:
        f"{FR}/logs/gen_data.log",
    benchmark:
        f"{FR}/benchmarks/fr_gen_data.tsv"
    params:
        cfg=lambda wc: as_json(fr(wc.scale, "data")),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.fusionroute data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule fr_train_expert:
    """One domain expert (90% its domain); at paper scale a pointer to its hub id."""
    input:
        data=f"{FR}/data",
        code=code("fusionroute", "expert"),
    output:
        directory(f"{FR}/experts/{{domain}}"),
    log:
        f"{FR}/logs/expert_{{domain}}.log",
    benchmark:
        f"{FR}/benchmarks/fr_train_expert__{{domain}}.tsv"
    params:
        runtime=runtime_of(fr_train_expert_job),
        cfg=lambda wc: as_json(fr_cfg(wc.scale, "expert")),
        seed=lambda wc: fr(wc.scale, "seed"),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(fr_train_expert_job),
    shell:
        "python -m methods.fusionroute expert --config {params.cfg:q} --domain {wildcards.domain} "
        "--seed {params.seed} --data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule fr_sft_router:
    """Router SFT phase: next-token loss + mixture routing loss on informative positions."""
    input:
        data=f"{FR}/data",
        experts=lambda wc: fr_experts(wc.scale),
        code=code("fusionroute", "sft"),
    output:
        directory(f"{FR}/ckpt/router_sft"),
    log:
        f"{FR}/logs/sft_router.log",
    benchmark:
        f"{FR}/benchmarks/fr_sft_router.tsv"
    params:
        runtime=runtime_of(fr_sft_router_job),
        cfg=lambda wc: as_json(fr_cfg(wc.scale, "router")),
        seed=lambda wc: fr(wc.scale, "seed"),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(fr_sft_router_job),
    shell:
        "python -m methods.fusionroute sft --config {params.cfg:q} --seed {params.seed} "
        "--data {input.data} --experts {input.experts} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule fr_cdpo:
    """Preference pairs (gold vs SFT-FusionRoute's wrong output), then complemented DPO."""
    input:
        data=f"{FR}/data",
        experts=lambda wc: fr_experts(wc.scale),
        router=f"{FR}/ckpt/router_sft",
        code=code("fusionroute", "cdpo"),
    output:
        router=directory(f"{FR}/ckpt/router_cdpo"),
        prefs=f"{FR}/data_prefs/prefs.jsonl",
    log:
        f"{FR}/logs/cdpo.log",
    benchmark:
        f"{FR}/benchmarks/fr_cdpo.tsv"
    params:
        runtime=runtime_of(fr_cdpo_job),
        cfg=lambda wc: as_json(fr_cfg(wc.scale, "cdpo", eval=fr(wc.scale, "eval"))),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(fr_cdpo_job),
    shell:
        "python -m methods.fusionroute cdpo --config {params.cfg:q} --data {input.data} "
        "--experts {input.experts} --router {input.router} --out {output.router} "
        "--prefs {output.prefs} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule fr_eval:
    """Exact match of every system, measured costs, summary.json, table and figure."""
    input:
        data=f"{FR}/data",
        experts=lambda wc: fr_experts(wc.scale),
        sft=f"{FR}/ckpt/router_sft",
        cdpo=f"{FR}/ckpt/router_cdpo",
        code=code("fusionroute", "evaluate"),
    output:
        metrics=f"{FR}/metrics.json",
        summary=f"{FR}/summary.json",
        table=f"{FR}/table.md",
        figure=report(
            f"{FR}/figures/em_by_domain.png",
            caption="../report/fusionroute.rst",
            category="fusionroute",
            labels={"scale": "{scale}", "figure": "exact match by domain"},
        ),
        caption=f"{FR}/figures/em_by_domain.caption.txt",
    log:
        f"{FR}/logs/eval.log",
    benchmark:
        f"{FR}/benchmarks/fr_eval.tsv"
    params:
        runtime=runtime_of(fr_eval_job),
        cfg=lambda wc: as_json(fr_cfg(wc.scale, "eval")),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(fr_eval_job),
    shell:
        "python -m methods.fusionroute evaluate --config {params.cfg:q} --data {input.data} "
        "--experts {input.experts} --sft {input.sft} --cdpo {input.cdpo} --out {output.metrics} "
        "--summary {output.summary} --table {output.table} --figure {output.figure} "
        "--threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


FIGURES["fusionroute"] = lambda scale: [f"{RESULTS}/{scale}/fusionroute/figures/em_by_domain.png"]
