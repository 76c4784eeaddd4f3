# SCOPE (arXiv 2601.22323): pool outcome table on generated arithmetic/reversal queries, anchor
# retrieval, the outcome predictor (SFT with and without anchors, then GRPO), α-controlled
# two-stage routing, baselines, unseen-model generalisation, claims C1-C5 (methods/scope/).
include: "helpers/scope.smk"  # its config helpers and GPU job sizers


SCOPE_DIR = f"{RESULTS}/{{scale}}/scope"


rule scope_member:
    """One extra pool member of SCOPE (trained by the shared pool's trainer on the shared pool data)."""
    input:
        data=f"{RESULTS}/{{scale}}/model_pool/data",
        code=code("core.model_pool", "train"),
    output:
        directory(f"{SCOPE_DIR}/members/{{xm}}"),
    log:
        f"{SCOPE_DIR}/logs/member_{{xm}}.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_member__{{xm}}.tsv"
    resources:
        **sized(scope_member_job),
    params:
        runtime=runtime_of(scope_member_job),
        # the whole model_pool section (every key is required) with this member as its only member
        cfg=lambda wc: as_json(
            {
                **hp(wc.scale, "model_pool"),
                "members": [m for m in hp(wc.scale, "scope", "extra_members") if m["name"] == wc.xm],
            }
        ),
    shell:
        "python -m methods.core.model_pool train --config {params.cfg:q} --member {wildcards.xm:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule scope_direct_member:
    """One extra pool member of SCOPE trained to answer directly (no scratchpad: a terse member), by
    the shared pool's trainer on the shared pool data."""
    input:
        data=f"{RESULTS}/{{scale}}/model_pool/data",
        code=code("scope", "member"),
    output:
        directory(f"{SCOPE_DIR}/members_direct/{{xm}}"),
    log:
        f"{SCOPE_DIR}/logs/member_direct_{{xm}}.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_direct_member__{{xm}}.tsv"
    resources:
        **sized(scope_member_job),
    params:
        runtime=runtime_of(scope_member_job),
        cfg=lambda wc: as_json(
            {
                **hp(wc.scale, "model_pool"),
                "members": [m for m in hp(wc.scale, "scope", "extra_members") if m["name"] == wc.xm],
            }
        ),
    shell:
        "python -m methods.scope member --config {params.cfg:q} --member {wildcards.xm:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule scope_outcomes:
    """Queries (anchor/train/test), every pool model's greedy outcome (correct, tokens, cost) on
    every query, and the cosine top-k anchors of every query."""
    input:
        members=lambda wc: scope_member_dirs(wc.scale),
        code=code("scope", "outcomes"),
    output:
        f"{SCOPE_DIR}/outcomes.json",
    log:
        f"{SCOPE_DIR}/logs/outcomes.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_outcomes.tsv"
    # outcomes → SFT → GRPO → route is the DAG's sequential tail: 2 torch threads, ≈1.5× faster
    threads: TORCH_THREADS
    resources:
        **sized(scope_outcomes_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(scope_outcomes_job),
        cfg=lambda wc: as_json(hp(wc.scale, "scope", "outcomes")),
    shell:
        "python -m methods.scope outcomes --config {params.cfg:q} --members {input.members:q} "
        "--out {output:q} --threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


rule scope_sft:
    """SFT of the outcome predictor (replicate seed), with k anchors in the prompt or none (ablation)."""
    input:
        outcomes=f"{SCOPE_DIR}/outcomes.json",
        code=code("scope", "sft"),
    output:
        directory(f"{SCOPE_DIR}/predictor/s{{seed}}/sft_{{variant}}"),
    log:
        f"{SCOPE_DIR}/logs/sft_{{variant}}_s{{seed}}.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_sft__{{variant}}_s{{seed}}.tsv"
    wildcard_constraints:
        variant="anchors|noanchor",
        seed=r"\d+",
    threads: TORCH_THREADS
    resources:
        **sized(scope_sft_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(scope_sft_job),
        cfg=lambda wc: as_json(hp(wc.scale, "scope", "predictor")),
    shell:
        "python -m methods.scope sft --config {params.cfg:q} --outcomes {input.outcomes:q} "
        "--variant {wildcards.variant:q} --seed {wildcards.seed:q} --out {output:q} "
        "--threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


rule scope_grpo:
    """The RL stage (GRPO: group advantages, KL to the SFT model of the same seed) on the anchored predictor."""
    input:
        outcomes=f"{SCOPE_DIR}/outcomes.json",
        sft=f"{SCOPE_DIR}/predictor/s{{seed}}/sft_anchors",
        code=code("scope", "grpo"),
    output:
        directory(f"{SCOPE_DIR}/predictor/s{{seed}}/rl"),
    log:
        f"{SCOPE_DIR}/logs/grpo_s{{seed}}.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_grpo__s{{seed}}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: TORCH_THREADS
    resources:
        **sized(scope_grpo_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(scope_grpo_job),
        cfg=lambda wc: as_json(hp(wc.scale, "scope", "predictor")),
    shell:
        "python -m methods.scope grpo --config {params.cfg:q} --outcomes {input.outcomes:q} --sft {input.sft:q} "
        "--seed {wildcards.seed:q} --out {output:q} --threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


rule scope_route:
    """Predictions of every seed's predictors on the test queries, α-grid routing, budget mode,
    baselines, per-seed claim metrics and their replicate records, figure (first seed)."""
    input:
        outcomes=f"{SCOPE_DIR}/outcomes.json",
        rl=lambda wc: scope_seed_dirs(wc.scale, "rl"),
        sft=lambda wc: scope_seed_dirs(wc.scale, "sft_anchors"),
        noanchor=lambda wc: scope_seed_dirs(wc.scale, "sft_noanchor"),
        code=code("scope", "route"),
    output:
        summary=f"{SCOPE_DIR}/summary.json",
        pareto=f"{SCOPE_DIR}/pareto.csv",
        budget=f"{SCOPE_DIR}/budget.json",
        selection=f"{SCOPE_DIR}/selection.json",
        figure=report(
            f"{SCOPE_DIR}/figures/pareto.png",
            caption="../../methods/scope/report.rst",
            category="scope",
            labels={"scale": "{scale}", "figure": "routing Pareto curves"},
        ),
    log:
        f"{SCOPE_DIR}/logs/route.log",
    benchmark:
        f"{SCOPE_DIR}/benchmarks/scope_route.tsv"
    threads: TORCH_THREADS
    resources:
        **sized(scope_route_job),
    params:
        torch_threads=TORCH_THREADS,
        runtime=runtime_of(scope_route_job),
        cfg=lambda wc: as_json(scope_route_cfg(wc.scale)),
        out_dir=lambda wc: f"{RESULTS}/{wc.scale}/scope",
        seeds=lambda wc: shell_words(str(x) for x in hp(wc.scale, "scope", "seeds")),
    shell:
        "python -m methods.scope route --config {params.cfg:q} --outcomes {input.outcomes:q} --seeds {params.seeds} "
        "--rl {input.rl:q} --sft {input.sft:q} --noanchor {input.noanchor:q} --out_dir {params.out_dir:q} --summary {output.summary:q} "
        "--figure {output.figure:q} --threads {params.torch_threads:q} --runtime {params.runtime:q} > {log:q} 2>&1"


FIGURES["scope"] = lambda scale: [f"{RESULTS}/{scale}/scope/figures/pareto.png"]
