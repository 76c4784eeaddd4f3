# PID's helpers (its rules, workflow/rules/pid.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def pid_hub(scale):
    """Paper scale: hub VL models and benchmarks (no tiny fusion models are trained)."""
    return bool(hp(scale, "pid", "hub")["vl_models"])


def pid_seeds(scale):
    """The training seeds (train.seeds): C2's replicates; one pass at paper scale, where the models
    are the hub's and nothing is trained."""
    seeds = hp(scale, "pid", "train")["seeds"]
    return seeds[:1] if pid_hub(scale) else seeds


def pid_models(scale, seed):
    """One model file per VL mixture weighting of training seed `seed`, plus the omni (tri-modal)
    model under the first seed (C3 is a sanity check of one model); none at paper scale, where the
    models are the hub's."""
    if pid_hub(scale):
        return []
    mixes = sorted(hp(scale, "pid", "train", "mixes")) + (["omni"] if int(seed) == pid_seeds(scale)[0] else [])
    return [f"{RESULTS}/{scale}/pid/models/s{seed}/{m}.pt" for m in mixes]


def pid_train_cfg(scale, seed):
    """The train section for one training seed's jobs: `seeds` narrowed to that seed, so adding a
    seed to the list reruns no job of the seeds already trained."""
    return {**hp(scale, "pid", "train"), "seeds": [int(seed)]}


def pid_pid_cfg(scale, seed):
    """The pid section for one training seed's PID step: the per-family estimates (C1's profile)
    only for the first seed, whose models C1 and C3 read; the other seeds' steps estimate the
    pooled C2 configurations only."""
    pc = hp(scale, "pid", "pid")
    return pc if int(seed) == pid_seeds(scale)[0] else {**pc, "family_configs": []}


def pid_per_seed(scale, pattern):
    """One path per training seed, `pattern` with {seed} filled in."""
    return [pattern.format(seed=s) for s in pid_seeds(scale)]


def pid_data_cfg(scale):
    return {**hp(scale, "pid", "data"), "hub": hp(scale, "pid", "hub")}


def pid_reweight_cfg(scale):
    """The reweighting's base model is a checkpoint of the first training seed."""
    train = pid_train_cfg(scale, pid_seeds(scale)[0])
    if pid_hub(scale):
        return {"train": train, **{k: hp(scale, "pid", k) for k in ("data", "pid", "reweight", "hub")}}
    return {"train": train, **{k: hp(scale, "pid", k) for k in ("pid", "reweight")}}


def pid_decide_cfg(scale, seed):
    """The decide step's config: the train section (tiny), or data + hub (paper scale)."""
    if pid_hub(scale):
        return {"data": hp(scale, "pid", "data"), "hub": hp(scale, "pid", "hub")}
    return pid_train_cfg(scale, seed)


def pid_models_arg(scale, seed):
    """`--models <files>` (tiny), nothing at paper scale (the hub models are in the config)."""
    models = pid_models(scale, seed)
    return f"--models {shell_words(models)}" if models else ""


# ---- GPU job sizes
def pid_lora_job(scale, model_id, tokens, batch, label):
    s = hub_spec(model_id)
    return R.train_job(
        s, tokens=tokens, seq=R.VL_ITEM_TOKENS, batch=batch, trainable=R.lora_params(s) / R.param_count(s), label=label
    )


def pid_train_job(wc):
    """The tiny fusion model (the step is not in the paper-scale DAG: the models are the hub's)."""
    t = hp(wc.scale, "pid", "train")
    return R.train_job(
        R.ModelSpec(t["hidden"], 1, 1, 1, t["hidden"], R.CHAR_VOCAB),
        tokens=t["steps"] * t["batch_size"],
        seq=1,
        batch=t["batch_size"],
        label="pid_train",
    )


def pid_decide_job(wc):
    """Every VL model's decisions on every benchmark's profile and test items under three maskings
    (none, text span, image), one model at a time."""
    h, d = hp(wc.scale, "pid", "hub"), hp(wc.scale, "pid", "data")
    works = [
        R.Infer(
            hub_spec(m),
            seqs=(d["n_profile"] + 3 * d["n_test"]) * len(h["benchmarks"]),
            prompt=R.VL_ITEM_TOKENS,
            gen=1,
            batch=8,
        )
        for m in h["vl_models"]
    ]
    return R.infer_job(works, label="pid_decide")


def pid_reweight_job(wc):
    h, r = hp(wc.scale, "pid", "hub"), hp(wc.scale, "pid", "reweight")
    tokens = 3 * len(r["seeds"]) * r["steps"] * r["batch_size"] * R.VL_ITEM_TOKENS  # uniform, random, PID weights
    return pid_lora_job(wc.scale, h["lora_base"], tokens, r["batch_size"], "pid_reweight")
