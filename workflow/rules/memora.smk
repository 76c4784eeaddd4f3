# Memora (arXiv 2602.03315): LoCoMo-lite (or LoCoMo / LongMemEval at paper scale), one
# embedding cache, the stores (flat RAG, Mem0-like fact store, Memora with and without cue
# anchors), retrieval with the semantic and the anchor-walking policy, the Theorem D.1 check,
# metrics, figure and claims (methods/memora/).
MM = f"{RESULTS}/{{scale}}/memora"


rule memora_data:
    """Generated conversations + questions (paper scale: LoCoMo / LongMemEval converted)."""
    input:
        code=code("memora", "data"),
    output:
        convs=f"{MM}/data/convs.json",
        qa=f"{MM}/data/qa.json",
    log:
        f"{MM}/logs/data.log",
    benchmark:
        f"{MM}/benchmarks/memora_data.tsv"
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
        out=lambda wc, output: os.path.dirname(output.convs),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora data --config {params.cfg:q} --out {params.out} > {log} 2>&1"


rule memora_embed:
    """MiniLM embeddings of every text known up front (one encoder load for the whole DAG)."""
    input:
        convs=f"{MM}/data/convs.json",
        qa=f"{MM}/data/qa.json",
        code=code("memora", "embed"),
    output:
        f"{MM}/emb.npz",
    log:
        f"{MM}/logs/embed.log",
    benchmark:
        f"{MM}/benchmarks/memora_embed.tsv"
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
        data=lambda wc, input: os.path.dirname(input.qa),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora embed --config {params.cfg:q} --data {params.data} --out {output} > {log} 2>&1"


rule memora_build:
    """One store per conversation: extraction, consolidation, cue anchors (or RAG chunks)."""
    input:
        convs=f"{MM}/data/convs.json",
        emb=f"{MM}/emb.npz",
        code=code("memora", "build"),
    output:
        f"{MM}/stores/{{mstore}}.json",
    log:
        f"{MM}/logs/build_{{mstore}}.log",
    benchmark:
        f"{MM}/benchmarks/memora_build__{{mstore}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
        data=lambda wc, input: os.path.dirname(input.convs),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora build --config {params.cfg:q} --store {wildcards.mstore} "
        "--data {params.data} --emb {input.emb} --out {output} > {log} 2>&1"


rule memora_retrieve:
    """Retrieval for every question with one store and one policy, with per-question metrics."""
    input:
        qa=f"{MM}/data/qa.json",
        emb=f"{MM}/emb.npz",
        built=f"{MM}/stores/{{mstore}}.json",
        code=code("memora", "retrieve"),
    output:
        f"{MM}/ret/{{mstore}}/{{mpolicy}}.jsonl",
    log:
        f"{MM}/logs/retrieve_{{mstore}}_{{mpolicy}}.log",
    benchmark:
        f"{MM}/benchmarks/memora_retrieve__{{mstore}}_{{mpolicy}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
        mpolicy="semantic|policy",
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
        data=lambda wc, input: os.path.dirname(input.qa),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora retrieve --config {params.cfg:q} --store {wildcards.mstore} "
        "--policy {wildcards.mpolicy} --data {params.data} --emb {input.emb} --built {input.built} "
        "--out {output} > {log} 2>&1"


rule memora_theory:
    """Theorem D.1 instance: Memora reduced to flat RAG returns RAG's ids, order and scores."""
    input:
        qa=f"{MM}/data/qa.json",
        emb=f"{MM}/emb.npz",
        code=code("memora", "theory"),
    output:
        f"{MM}/special_cases.json",
    log:
        f"{MM}/logs/theory.log",
    benchmark:
        f"{MM}/benchmarks/memora_theory.tsv"
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
        data=lambda wc, input: os.path.dirname(input.qa),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora theory --config {params.cfg:q} --data {params.data} --emb {input.emb} "
        "--out {output} > {log} 2>&1"


rule memora_aggregate:
    """Metrics per store, policy and category; claim metrics (summary.json); the figure."""
    input:
        runs=lambda wc: mem_runs(wc.scale),
        builds=lambda wc: mem_builds(wc.scale),
        theory=f"{MM}/special_cases.json",
        code=code("memora", "aggregate"),
    output:
        table=f"{MM}/metrics.csv",
        summary=f"{MM}/summary.json",
        figure=report(
            f"{MM}/figures/retrieval.png",
            caption="../report/memora.rst",
            category="memora",
            labels={"scale": "{scale}", "figure": "evidence recall and context size"},
        ),
        caption=f"{MM}/figures/retrieval.caption.txt",
    log:
        f"{MM}/logs/aggregate.log",
    benchmark:
        f"{MM}/benchmarks/memora_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(mem(wc.scale)),
    threads: 1
    conda:
        conda_env
    resources:
        mem_mb=res("mem_mb"),
        runtime=res("runtime"),
    shell:
        "python -m methods.memora aggregate --config {params.cfg:q} "
        "--runs {input.runs} --builds {input.builds} --theory {input.theory} --table {output.table} "
        "--summary {output.summary} --figure {output.figure} > {log} 2>&1"


FIGURES["memora"] = lambda scale: [f"{RESULTS}/{scale}/memora/figures/retrieval.png"]
