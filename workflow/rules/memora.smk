# Memora (arXiv 2602.03315): LoCoMo-lite (or LoCoMo / LongMemEval at paper scale), one
# embedding cache, the stores (flat RAG, Mem0-like fact store, Memora with and without cue
# anchors), retrieval with the semantic and the anchor-walking policy, the Theorem D.1 check,
# metrics, figure and claims (methods/memora/).
include: "helpers/memora.smk"  # its config helpers


MEMORA_DIR = f"{RESULTS}/{{scale}}/memora"


rule memora_data:
    """Generated conversations + questions (paper scale: LoCoMo / LongMemEval converted)."""
    input:
        code=code("memora", "data"),
    output:
        convs=f"{MEMORA_DIR}/data/convs.json",
        qa=f"{MEMORA_DIR}/data/qa.json",
    log:
        f"{MEMORA_DIR}/logs/data.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "memora")),
        out=lambda wc, output: os.path.dirname(output.convs),
    shell:
        "python -m methods.memora data --config {params.cfg:q} --out {params.out:q} > {log:q} 2>&1"


rule memora_embed:
    """MiniLM embeddings of every text known up front (one encoder load for the whole DAG)."""
    input:
        convs=f"{MEMORA_DIR}/data/convs.json",
        qa=f"{MEMORA_DIR}/data/qa.json",
        code=code("memora", "embed"),
    output:
        f"{MEMORA_DIR}/emb.npz",
    log:
        f"{MEMORA_DIR}/logs/embed.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_embed.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "memora")),
        data=lambda wc, input: os.path.dirname(input.qa),
    shell:
        "python -m methods.memora embed --config {params.cfg:q} --data {params.data:q} --out {output:q} > {log:q} 2>&1"


rule memora_build:
    """One store per conversation: extraction, consolidation, cue anchors (or RAG chunks)."""
    input:
        convs=f"{MEMORA_DIR}/data/convs.json",
        emb=f"{MEMORA_DIR}/emb.npz",
        served=lambda wc: memora_served(wc.scale, "build"),
        code=code("memora", "build"),
    output:
        f"{MEMORA_DIR}/stores/{{mstore}}.json",
    log:
        f"{MEMORA_DIR}/logs/build_{{mstore}}.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_build__{{mstore}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
    threads: client_threads(lambda wc: memora_served(wc.scale, "build"))
    params:
        cfg=lambda wc: as_json(memora_step_cfg(wc.scale, "build")),
        data=lambda wc, input: os.path.dirname(input.convs),
    shell:
        "python -m methods.memora build --config {params.cfg:q} --store {wildcards.mstore:q} "
        "--data {params.data:q} --emb {input.emb:q} --out {output:q} > {log:q} 2>&1"


rule memora_retrieve:
    """Retrieval for every question with one store and one policy, with per-question metrics."""
    input:
        qa=f"{MEMORA_DIR}/data/qa.json",
        emb=f"{MEMORA_DIR}/emb.npz",
        built=f"{MEMORA_DIR}/stores/{{mstore}}.json",
        served=lambda wc: memora_served(wc.scale, "retrieve"),
        code=code("memora", "retrieve"),
    output:
        f"{MEMORA_DIR}/ret/{{mstore}}/{{mpolicy}}.jsonl",
    log:
        f"{MEMORA_DIR}/logs/retrieve_{{mstore}}_{{mpolicy}}.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_retrieve__{{mstore}}_{{mpolicy}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
        mpolicy="semantic|policy",
    threads: client_threads(lambda wc: memora_served(wc.scale, "retrieve"))
    params:
        cfg=lambda wc: as_json(memora_step_cfg(wc.scale, "retrieve")),
        data=lambda wc, input: os.path.dirname(input.qa),
    shell:
        "python -m methods.memora retrieve --config {params.cfg:q} --store {wildcards.mstore:q} "
        "--policy {wildcards.mpolicy:q} --data {params.data:q} --emb {input.emb:q} --built {input.built:q} "
        "--out {output:q} > {log:q} 2>&1"


rule memora_answer:
    """Answers from one run's retrieved memories by the answering LLM (memora.qa.answer);
    LoCoMo's adversarial category 5 is excluded (the paper's protocol)."""
    input:
        qa=f"{MEMORA_DIR}/data/qa.json",
        built=f"{MEMORA_DIR}/stores/{{mstore}}.json",
        ret=f"{MEMORA_DIR}/ret/{{mstore}}/{{mpolicy}}.jsonl",
        served=lambda wc: memora_served(wc.scale, "answer"),
        code=code("memora", "answer"),
    output:
        f"{MEMORA_DIR}/qa/{{mstore}}/{{mpolicy}}/answers.jsonl",
    log:
        f"{MEMORA_DIR}/logs/answer_{{mstore}}_{{mpolicy}}.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_answer__{{mstore}}_{{mpolicy}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
        mpolicy="semantic|policy",
    threads: client_threads(lambda wc: memora_served(wc.scale, "answer"))
    params:
        cfg=lambda wc: as_json(memora_step_cfg(wc.scale, "answer")),
        data=lambda wc, input: os.path.dirname(input.qa),
    shell:
        "python -m methods.memora answer --config {params.cfg:q} --store {wildcards.mstore:q} "
        "--policy {wildcards.mpolicy:q} --data {params.data:q} --built {input.built:q} --ret {input.ret:q} "
        "--out {output:q} > {log:q} 2>&1"


rule memora_judge:
    """LLM-judge labels (CORRECT/WRONG, or yes/no on LongMemEval) of one run's answers against
    the gold answers (memora.qa.judge); replies without a verdict are kept as failures."""
    input:
        qa=f"{MEMORA_DIR}/data/qa.json",
        answers=f"{MEMORA_DIR}/qa/{{mstore}}/{{mpolicy}}/answers.jsonl",
        served=lambda wc: memora_served(wc.scale, "judge"),
        code=code("memora", "judge"),
    output:
        f"{MEMORA_DIR}/qa/{{mstore}}/{{mpolicy}}/judged.jsonl",
    log:
        f"{MEMORA_DIR}/logs/judge_{{mstore}}_{{mpolicy}}.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_judge__{{mstore}}_{{mpolicy}}.tsv"
    wildcard_constraints:
        mstore="rag|factstore|memora|memora_noanchor",
        mpolicy="semantic|policy",
    threads: client_threads(lambda wc: memora_served(wc.scale, "judge"))
    params:
        cfg=lambda wc: as_json(memora_step_cfg(wc.scale, "judge")),
        data=lambda wc, input: os.path.dirname(input.qa),
    shell:
        "python -m methods.memora judge --config {params.cfg:q} --data {params.data:q} "
        "--answers {input.answers:q} --out {output:q} > {log:q} 2>&1"


rule memora_theory:
    """Theorem D.1 instance: Memora reduced to flat RAG returns RAG's ids, order and scores."""
    input:
        qa=f"{MEMORA_DIR}/data/qa.json",
        emb=f"{MEMORA_DIR}/emb.npz",
        served=lambda wc: memora_served(wc.scale, "theory"),
        code=code("memora", "theory"),
    output:
        f"{MEMORA_DIR}/special_cases.json",
    log:
        f"{MEMORA_DIR}/logs/theory.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_theory.tsv"
    threads: client_threads(lambda wc: memora_served(wc.scale, "theory"))
    params:
        cfg=lambda wc: as_json(memora_step_cfg(wc.scale, "theory")),
        data=lambda wc, input: os.path.dirname(input.qa),
    shell:
        "python -m methods.memora theory --config {params.cfg:q} --data {params.data:q} --emb {input.emb:q} "
        "--out {output:q} > {log:q} 2>&1"


rule memora_aggregate:
    """Metrics per store, policy and category; claim metrics (summary.json); the figure."""
    input:
        runs=lambda wc: memora_runs(wc.scale),
        builds=lambda wc: memora_builds(wc.scale),
        judged=lambda wc: memora_judged(wc.scale),
        theory=f"{MEMORA_DIR}/special_cases.json",
        code=code("memora", "aggregate"),
    output:
        table=f"{MEMORA_DIR}/metrics.csv",
        summary=f"{MEMORA_DIR}/summary.json",
        figure=report(
            f"{MEMORA_DIR}/figures/retrieval.png",
            caption="../../methods/memora/report.rst",
            category="memora",
            labels={"scale": "{scale}", "figure": "evidence recall and context size"},
        ),
        caption=f"{MEMORA_DIR}/figures/retrieval.caption.txt",
    log:
        f"{MEMORA_DIR}/logs/aggregate.log",
    benchmark:
        f"{MEMORA_DIR}/benchmarks/memora_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "memora")),
    shell:
        "python -m methods.memora aggregate --config {params.cfg:q} "
        "--runs {input.runs:q} --builds {input.builds:q} --theory {input.theory:q} --table {output.table:q} "
        "--summary {output.summary:q} --figure {output.figure:q} --judged {input.judged:q} > {log:q} 2>&1"


FIGURES["memora"] = lambda scale: [f"{RESULTS}/{scale}/memora/figures/retrieval.png"]
