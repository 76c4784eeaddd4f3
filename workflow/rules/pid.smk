# PID for MLLMs (arXiv 2606.00959): generated bimodal / tri-modal items, a tiny fusion model
# trained under several mixture weightings (3 checkpoints each) and a vision-dominant omni model,
# decisions under calibrated modality masking, decision-level BATCH PID, the vision-masking
# intervention, PID-guided reweighting, table, figures and claims C1–C4 (methods/pid/).
include: "helpers/pid.smk"  # its config helpers and GPU job sizers


PID_DIR = f"{RESULTS}/{{scale}}/pid"


rule pid_data:
    """Bimodal (RED, U_TXT, U_VIS, SYN) and tri-modal AV items: train / profile / test."""
    input:
        code=code("pid", "data"),
    output:
        f"{PID_DIR}/data.npz",
    log:
        f"{PID_DIR}/logs/data.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_data.tsv"
    params:
        cfg=lambda wc: as_json(pid_data_cfg(wc.scale)),
    shell:
        "python -m methods.pid data --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule pid_train:
    """One fusion model under one mixture weighting (or the omni model), saving every checkpoint."""
    input:
        data=f"{PID_DIR}/data.npz",
        code=code("pid", "train"),
    output:
        f"{PID_DIR}/models/s{{pid_seed}}/{{pid_mix}}.pt",
    log:
        f"{PID_DIR}/logs/train/s{{pid_seed}}/{{pid_mix}}.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_train__s{{pid_seed}}__{{pid_mix}}.tsv"
    wildcard_constraints:
        pid_mix="[a-z_]+",
        pid_seed="[0-9]+",
    resources:
        **sized(pid_train_job),
    params:
        runtime=runtime_of(pid_train_job),
        cfg=lambda wc: as_json(pid_train_cfg(wc.scale, wc.pid_seed)),
    shell:
        "python -m methods.pid train --config {params.cfg:q} --mix {wildcards.pid_mix:q} --seed {wildcards.pid_seed:q} --data {input.data:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule pid_decide:
    """Decisions p(y|v,t), p(y|v), p(y|t) by calibrated masking; accuracy with vision masked (one
    training seed's models)."""
    input:
        data=f"{PID_DIR}/data.npz",
        models=lambda wc: pid_models(wc.scale, wc.pid_seed),
        code=code("pid", "decide"),
    output:
        decisions=f"{PID_DIR}/decisions/s{{pid_seed}}.npz",
        interventions=f"{PID_DIR}/interventions/s{{pid_seed}}.json",
    log:
        f"{PID_DIR}/logs/decide/s{{pid_seed}}.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_decide__s{{pid_seed}}.tsv"
    wildcard_constraints:
        pid_seed="[0-9]+",
    resources:
        **sized(pid_decide_job),
    params:
        runtime=runtime_of(pid_decide_job),
        cfg=lambda wc: as_json(pid_decide_cfg(wc.scale, wc.pid_seed)),
        models=lambda wc: pid_models_arg(wc.scale, wc.pid_seed),
    shell:
        "python -m methods.pid decide --config {params.cfg:q} --data {input.data:q} {params.models} "
        "--out {output.decisions:q} --interventions {output.interventions:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule pid_pid:
    """BATCH PID of every configuration's decisions (Sensory PID for the omni model), one training seed."""
    input:
        data=f"{PID_DIR}/data.npz",
        decisions=f"{PID_DIR}/decisions/s{{pid_seed}}.npz",
        code=code("pid", "pid"),
    output:
        f"{PID_DIR}/pid/s{{pid_seed}}.json",
    log:
        f"{PID_DIR}/logs/pid/s{{pid_seed}}.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_pid__s{{pid_seed}}.tsv"
    wildcard_constraints:
        pid_seed="[0-9]+",
    params:
        runtime=cpu_runtime,
        cfg=lambda wc: as_json(pid_pid_cfg(wc.scale, wc.pid_seed)),
    shell:
        "python -m methods.pid pid --config {params.cfg:q} --data {input.data:q} --decisions {input.decisions:q} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule pid_reweight:
    """PID-guided reweighted fine-tuning of the last layers vs uniform and random weights (base: a
    checkpoint of the first training seed)."""
    input:
        data=f"{PID_DIR}/data.npz",
        models=lambda wc: pid_models(wc.scale, pid_seeds(wc.scale)[0]),
        code=code("pid", "reweight"),
    output:
        f"{PID_DIR}/reweight.json",
    log:
        f"{PID_DIR}/logs/reweight.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_reweight.tsv"
    resources:
        **sized(pid_reweight_job),
    params:
        runtime=runtime_of(pid_reweight_job),
        cfg=lambda wc: as_json(pid_reweight_cfg(wc.scale)),
        models=lambda wc: pid_models_arg(wc.scale, pid_seeds(wc.scale)[0]),
    shell:
        "python -m methods.pid reweight --config {params.cfg:q} --data {input.data:q} {params.models} "
        "--out {output:q} --threads {threads} --runtime {params.runtime:q} > {log:q} 2>&1"


rule pid_aggregate:
    """Claim metrics (summary.json), table, PID profiles and synergy-vs-sensitivity figures."""
    input:
        pid=lambda wc: pid_per_seed(wc.scale, f"{RESULTS}/{wc.scale}/pid/pid/s{{seed}}.json"),
        interventions=lambda wc: pid_per_seed(wc.scale, f"{RESULTS}/{wc.scale}/pid/interventions/s{{seed}}.json"),
        reweight=f"{PID_DIR}/reweight.json",
        code=code("pid", "aggregate"),
    output:
        summary=f"{PID_DIR}/summary.json",
        table=f"{PID_DIR}/table.md",
        profiles=report(
            f"{PID_DIR}/figures/pid_profiles.png",
            caption="../../methods/pid/report.rst",
            category="pid",
            labels={"scale": "{scale}", "figure": "PID profile per task family"},
        ),
        synergy=report(
            f"{PID_DIR}/figures/synergy_vs_delta.png",
            caption="../../methods/pid/report.rst",
            category="pid",
            labels={"scale": "{scale}", "figure": "synergy vs vision-masking sensitivity"},
        ),
    log:
        f"{PID_DIR}/logs/aggregate.log",
    benchmark:
        f"{PID_DIR}/benchmarks/pid_aggregate.tsv"
    params:
        cfg=lambda wc: as_json(hp(wc.scale, "pid", "analysis")),
    shell:
        "python -m methods.pid aggregate --config {params.cfg:q} --pid {input.pid:q} "
        "--interventions {input.interventions:q} --reweight {input.reweight:q} --summary {output.summary:q} "
        "--table {output.table:q} --fig_profiles {output.profiles:q} --fig_synergy {output.synergy:q} > {log:q} 2>&1"


FIGURES["pid"] = lambda scale: [
    f"{RESULTS}/{scale}/pid/figures/pid_profiles.png",
    f"{RESULTS}/{scale}/pid/figures/synergy_vs_delta.png",
]
