# PID's helpers (its rules, workflow/rules/pid.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def pid_models(scale):
    """One model file per VL mixture weighting, plus the omni (tri-modal) model."""
    return [f"{RESULTS}/{scale}/pid/models/{m}.pt" for m in [*sorted(hp(scale, "pid", "train", "mixes")), "omni"]]


def pid_data_cfg(scale):
    return {**hp(scale, "pid", "data"), "hub": hp(scale, "pid", "hub")}


def pid_reweight_cfg(scale):
    return {k: hp(scale, "pid", k) for k in ("train", "pid", "reweight")}


# ---- GPU job sizes
def pid_lora_job(scale, model_id, tokens, batch, label):
    s = hub_spec(model_id)
    return R.train_job(s, tokens=tokens, seq=R.VL_ITEM_TOKENS, batch=batch,
                       trainable=R.lora_params(s) / R.param_count(s), label=label)


def pid_train_job(wc):
    """Paper scale (the step itself is not implemented yet): a LoRA fine-tune of the VL base
    (the omni model for `omni`) under one mixture weighting."""
    h, t = hp(wc.scale, "pid", "hub"), hp(wc.scale, "pid", "train")
    model = h["omni_models"][0] if wc.pid_mix == "omni" else h["lora_base"]
    if not model:
        return R.train_job(R.ModelSpec(t["hidden"], 1, 1, 1, t["hidden"], R.CHAR_VOCAB),
                           tokens=t["steps"] * t["batch_size"], seq=1, batch=t["batch_size"], label="pid_train")
    return pid_lora_job(wc.scale, model, t["steps"] * t["batch_size"] * R.VL_ITEM_TOKENS, t["batch_size"], "pid_train")


def pid_decide_job(wc):
    """Every VL and omni model's decisions on every benchmark's test items under three maskings
    (both modalities, vision only, text only), one model at a time."""
    h, n = hp(wc.scale, "pid", "hub"), hp(wc.scale, "pid", "data", "n_test")
    works = [R.Infer(hub_spec(m), seqs=3 * n * len(h["benchmarks"]), prompt=R.VL_ITEM_TOKENS, gen=1, batch=8)
             for m in h["vl_models"]]
    works += [R.Infer(hub_spec(m), seqs=3 * n * len(h["omni_benchmarks"]), prompt=R.VL_ITEM_TOKENS, gen=1, batch=8)
              for m in h["omni_models"]]
    return R.infer_job(works, label="pid_decide")


def pid_reweight_job(wc):
    h, r = hp(wc.scale, "pid", "hub"), hp(wc.scale, "pid", "reweight")
    tokens = 3 * len(r["seeds"]) * r["steps"] * r["batch_size"] * R.VL_ITEM_TOKENS  # uniform, random, PID weights
    return pid_lora_job(wc.scale, h["lora_base"], tokens, r["batch_size"], "pid_reweight")
