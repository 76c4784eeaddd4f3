# AGoQ's helpers (its rules, workflow/rules/agoq.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def agoq_run_cfg(scale, name, seed):
    """The run section plus the variant (bit policy, all-reduce) named `name` and the seed."""
    found = [v for v in hp(scale, "agoq", "variants") if v["name"] == name]
    if not found:
        raise WorkflowError(f"agoq: train_variants names {name!r}, which is not in agoq.variants")
    return {**hp(scale, "agoq", "run"), "variant": found[0], "seed": int(seed)}


def agoq_probe_cfg(scale):
    """The probe section plus every variant's bit policy (their bytes are measured there)."""
    return {**hp(scale, "agoq", "probe"), "variants": hp(scale, "agoq", "variants")}


def agoq_runs(scale):
    """Every trained (variant, seed) run directory."""
    return [
        f"{RESULTS}/{scale}/agoq/runs/{v}_s{seed}"
        for v in hp(scale, "agoq", "train_variants")
        for seed in hp(scale, "agoq", "seeds")
    ]


def agoq_probe_model(scale):
    """The fp baseline's run of the first seed: the probe's trained model."""
    return f"{RESULTS}/{scale}/agoq/runs/{hp(scale, 'agoq', 'analysis', 'baseline')}_s{hp(scale, 'agoq', 'seeds')[0]}"


# ---- GPU job sizes
def agoq_model_spec(scale):
    run, tok = hp(scale, "agoq", "run"), hp(scale, "agoq", "data", "tokenizer")
    vocab = HUB_MODELS[tok]["vocab"] if tok in HUB_MODELS else R.CHAR_VOCAB
    return hub_spec(run["hub_id"]) if run["hub_id"] else R.spec_from_config(run["model"], vocab)


def agoq_train_job(wc):
    """world_size DDP ranks, one GPU each (mp.start_processes on one host): every rank holds the
    whole model, its AdamW state, the flat fp32 gradient and its all-reduced mean, and the
    activations of batch / world_size sequences."""
    run = hp(wc.scale, "agoq", "run")
    t, world, s = run["train"], run["world_size"], agoq_model_spec(wc.scale)
    return R.train_job(
        s,
        tokens=train_tokens(t, run["seq_len"]),
        seq=run["seq_len"],
        batch=t["batch_size"],
        optimizer=t["optimizer"],
        gpus=world,
        micro=t["batch_size"] // world,
        replicated=True,
        parallel=True,
        extra_per_gpu=2 * 4 * R.param_count(s),
        label="agoq_train",
    )


def agoq_probe_job(wc):
    """W simulated workers in one process: gradients of micro-batches (no optimizer) and the
    W flat fp32 gradients of the collective."""
    p, s = hp(wc.scale, "agoq", "probe"), agoq_model_spec(wc.scale)
    tokens = p["n_batches"] * sum(p["workers"]) * p["micro_batch"] * p["seq_len"]
    return R.train_job(
        s,
        tokens=tokens,
        seq=p["seq_len"],
        batch=p["micro_batch"],
        optimizer="none",
        extra_bytes=4 * R.param_count(s) * max(p["workers"]),
        label="agoq_probe",
    )
