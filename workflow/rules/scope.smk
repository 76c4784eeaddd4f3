# SCOPE (arXiv 2601.22323): pool outcome table on generated arithmetic/reversal queries, anchor
# retrieval, the outcome predictor (SFT with and without anchors, then GRPO), α-controlled
# two-stage routing, baselines, unseen-model generalisation, claims C1-C5 (methods/scope/).
SC = f"{RESULTS}/{{scale}}/scope"


rule sc_member:
    """One extra pool member of SCOPE (trained by the shared pool's trainer on the shared pool data)."""
    input:
        data=f"{RESULTS}/{{scale}}/model_pool/data",
        code=code("model_pool", "train"),
    output:
        directory(f"{SC}/members/{{xm}}"),
    log:
        f"{SC}/logs/member_{{xm}}.log",
    benchmark:
        f"{SC}/benchmarks/sc_member__{{xm}}.tsv"
    params:
        runtime=runtime_of(sc_member_job),
        cfg=lambda wc: as_json({"members": [m for m in sc(wc.scale, "extra_members") if m["name"] == wc.xm]}),
    threads: 1
    conda:
        conda_env
    resources:
        **sized(sc_member_job),
    shell:
        "python -m methods.model_pool train --config {params.cfg:q} --member {wildcards.xm} "
        "--data {input.data} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sc_outcomes:
    """Queries (anchor/train/test), every pool model's greedy outcome (correct, tokens, cost) on
    every query, and the cosine top-k anchors of every query."""
    input:
        members=lambda wc: sc_member_dirs(wc.scale),
        code=code("scope", "outcomes"),
    output:
        f"{SC}/outcomes.json",
    log:
        f"{SC}/logs/outcomes.log",
    benchmark:
        f"{SC}/benchmarks/sc_outcomes.tsv"
    params:
        runtime=runtime_of(sc_outcomes_job),
        cfg=lambda wc: as_json(sc(wc.scale, "outcomes")),
    threads: 2  # outcomes → SFT → GRPO → route is the DAG's sequential tail: 2 torch threads, ≈1.5× faster
    conda:
        conda_env
    resources:
        **sized(sc_outcomes_job),
    shell:
        "python -m methods.scope outcomes --config {params.cfg:q} --members {input.members} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sc_sft:
    """SFT of the outcome predictor, with k anchors in the prompt or none (ablation)."""
    input:
        outcomes=f"{SC}/outcomes.json",
        code=code("scope", "sft"),
    output:
        directory(f"{SC}/predictor/sft_{{variant}}"),
    log:
        f"{SC}/logs/sft_{{variant}}.log",
    benchmark:
        f"{SC}/benchmarks/sc_sft__{{variant}}.tsv"
    wildcard_constraints:
        variant="anchors|noanchor",
    params:
        runtime=runtime_of(sc_sft_job),
        cfg=lambda wc: as_json(sc(wc.scale, "predictor")),
    threads: 2
    conda:
        conda_env
    resources:
        **sized(sc_sft_job),
    shell:
        "python -m methods.scope sft --config {params.cfg:q} --outcomes {input.outcomes} "
        "--variant {wildcards.variant} --out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sc_grpo:
    """The RL stage (GRPO: group advantages, KL to the SFT model) on the anchored predictor."""
    input:
        outcomes=f"{SC}/outcomes.json",
        sft=f"{SC}/predictor/sft_anchors",
        code=code("scope", "grpo"),
    output:
        directory(f"{SC}/predictor/rl"),
    log:
        f"{SC}/logs/grpo.log",
    benchmark:
        f"{SC}/benchmarks/sc_grpo.tsv"
    params:
        runtime=runtime_of(sc_grpo_job),
        cfg=lambda wc: as_json(sc(wc.scale, "predictor")),
    threads: 2
    conda:
        conda_env
    resources:
        **sized(sc_grpo_job),
    shell:
        "python -m methods.scope grpo --config {params.cfg:q} --outcomes {input.outcomes} --sft {input.sft} "
        "--out {output} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


rule sc_route:
    """Predictions on the test queries, α-grid routing, budget mode, baselines, metrics, figure."""
    input:
        outcomes=f"{SC}/outcomes.json",
        rl=f"{SC}/predictor/rl",
        sft=f"{SC}/predictor/sft_anchors",
        noanchor=f"{SC}/predictor/sft_noanchor",
        code=code("scope", "route"),
    output:
        summary=f"{SC}/summary.json",
        pareto=f"{SC}/pareto.csv",
        budget=f"{SC}/budget.json",
        selection=f"{SC}/selection.json",
        figure=report(
            f"{SC}/figures/pareto.png",
            caption="../report/scope.rst",
            category="scope",
            labels={"scale": "{scale}", "figure": "routing Pareto curves"},
        ),
    log:
        f"{SC}/logs/route.log",
    benchmark:
        f"{SC}/benchmarks/sc_route.tsv"
    params:
        runtime=runtime_of(sc_route_job),
        cfg=lambda wc: as_json({"route": sc(wc.scale, "route"), "k_prompt": sc(wc.scale, "predictor", "k_prompt")}),
        out_dir=lambda wc: f"{RESULTS}/{wc.scale}/scope",
    threads: 2
    conda:
        conda_env
    resources:
        **sized(sc_route_job),
    shell:
        "python -m methods.scope route --config {params.cfg:q} --outcomes {input.outcomes} --rl {input.rl} "
        "--sft {input.sft} --noanchor {input.noanchor} --out_dir {params.out_dir} --summary {output.summary} "
        "--figure {output.figure} --threads {threads} --runtime {params.runtime:q} > {log} 2>&1"


FIGURES["scope"] = lambda scale: [f"{RESULTS}/{scale}/scope/figures/pareto.png"]
