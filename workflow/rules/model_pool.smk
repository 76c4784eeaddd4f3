# The shared model pool (methods/core/model_pool/): the task mixture, the policy members and the
# process verifier, and the members' measured costs, under results/{scale}/model_pool/. Part of the
# shared library, not a paper: UniScale's replay table and SCOPE's routing pool use it. Its config
# is the top-level `model_pool` section of config/scales/<scale>.yaml.
include: "helpers/model_pool.smk"  # its paths, member configs and GPU job sizers


MODEL_POOL_DIR = f"{RESULTS}/{{scale}}/model_pool"


rule model_pool_data:
    """Task mixture (arith + rev with step scratchpads), held-out queries, char tokenizer."""
    input:
        code=code("core.model_pool", "data"),
    output:
        directory(f"{MODEL_POOL_DIR}/data"),
    log:
        f"{MODEL_POOL_DIR}/logs/data.log",
    benchmark:
        f"{MODEL_POOL_DIR}/benchmarks/model_pool_data.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "model_pool")),
    shell:
        "python -m methods.core.model_pool data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule model_pool_train_member:
    """One pool member (paper scale: a pointer to its hub id)."""
    input:
        data=f"{MODEL_POOL_DIR}/data",
        code=code("core.model_pool", "train"),
    output:
        directory(f"{MODEL_POOL_DIR}/members/{{member}}"),
    log:
        f"{MODEL_POOL_DIR}/logs/train_{{member}}.log",
    benchmark:
        f"{MODEL_POOL_DIR}/benchmarks/model_pool_train_member__{{member}}.tsv"
    resources:
        **sized(model_pool_train_member_job),
    params:
        runtime=runtime_of(model_pool_train_member_job),
        cfg=lambda wc: as_json(hp(wc.scale, "model_pool")),
    shell:
        "python -m methods.core.model_pool train --config {params.cfg:q} --member {wildcards.member:q} "
        "--data {input.data:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule model_pool_train_verifier:
    """The process verifier (P(Y) at each step mark; exact step labels on corrupted gold scratchpads and
    on the policy members' own sampled scratchpads)."""
    input:
        data=f"{MODEL_POOL_DIR}/data",
        members=lambda wc: model_pool_members(wc.scale),
        code=code("core.model_pool", "verifier"),
    output:
        directory(f"{MODEL_POOL_DIR}/verifier"),
    log:
        f"{MODEL_POOL_DIR}/logs/verifier.log",
    benchmark:
        f"{MODEL_POOL_DIR}/benchmarks/model_pool_train_verifier.tsv"
    resources:
        **sized(model_pool_train_verifier_job),
    params:
        runtime=runtime_of(model_pool_train_verifier_job),
        cfg=lambda wc: as_json(hp(wc.scale, "model_pool")),
    shell:
        "python -m methods.core.model_pool verifier --config {params.cfg:q} --data {input.data:q} --out {output:q} "
        "--members {input.members:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule model_pool_costs:
    """FLOPs/token (analytic, checked by FlopCounterMode) and measured wall time/token per member."""
    input:
        members=lambda wc: model_pool_members(wc.scale),
        verifier=f"{MODEL_POOL_DIR}/verifier",
        code=code("core.model_pool", "costs"),
    output:
        f"{MODEL_POOL_DIR}/pool_costs.json",
    log:
        f"{MODEL_POOL_DIR}/logs/costs.log",
    benchmark:
        f"{MODEL_POOL_DIR}/benchmarks/model_pool_costs.tsv"
    resources:
        **sized(model_pool_costs_job),
    params:
        runtime=runtime_of(model_pool_costs_job),
        cfg=lambda wc: as_json(hp(wc.scale, "model_pool")),
    shell:
        "python -m methods.core.model_pool costs --config {params.cfg:q} --members {input.members:q} "
        "--verifier {input.verifier:q} --out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"
