# LFQ's helpers (its rules, workflow/rules/lfq.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


# The variants one seed and setting packs into one process each (lfq_quantize, lfq_final): a
# rule's outputs are fixed when the workflow is parsed, so a scale's `variants` must be this grid.
LFQ_BASELINES = ("rtn", "gptq", "omni")
LFQ_FINALS = ("gptq-lfq", "omni-headmse", "omni-lfq")


def lfq_variants(scale):
    v = hp(scale, "lfq", "variants")
    if sorted(v) != sorted(LFQ_BASELINES + LFQ_FINALS):
        raise ValueError(
            f"config lfq.variants at scale {scale} must be {list(LFQ_BASELINES + LFQ_FINALS)} "
            f"(lfq_quantize and lfq_final write that grid in one process each), got {v}"
        )
    return v


def lfq_setting_name(setting):
    """A quantization setting as it appears in paths: bits 3, group 32 → w3g32."""
    return f"w{setting['bits']}g{setting['group_size']}"


def lfq_settings(scale):
    return [lfq_setting_name(s) for s in hp(scale, "lfq", "settings")]


def lfq_seeds(scale):
    """The quantization seeds (the claims' outer replicates), as they appear in paths: s0, s1, ..."""
    return [f"s{s}" for s in hp(scale, "lfq", "seeds")]


def lfq_seed_number(seed):
    """s2 → 2 (the seed wildcard)."""
    return int(seed[1:])


def lfq_calib_cfg(scale, seed):
    """The `calib` section with replicate `seed` (s<k>) added to its seed: its own windows."""
    c = hp(scale, "lfq", "calib")
    return {**c, "seed": c["seed"] + lfq_seed_number(seed)}


def lfq_quant_cfg(scale, name, seed):
    """The `quant` section plus the bits and group size of setting `name`, its seed moved by
    replicate `seed` (s<k>)."""
    (s,) = [s for s in hp(scale, "lfq", "settings") if lfq_setting_name(s) == name]
    q = hp(scale, "lfq", "quant")
    return {**q, "seed": q["seed"] + lfq_seed_number(seed), "bits": s["bits"], "group_size": s["group_size"]}


def lfq_final_bases(wc, unique=False):
    """The baseline directory of each final-block variant of LFQ_FINALS (in its order), or the
    distinct ones (`unique`, the rule's inputs)."""
    dirs = [lfq_model_dir(wc.scale, wc.seed, v.split("-")[0], wc.qcfg) for v in LFQ_FINALS]
    return list(dict.fromkeys(dirs)) if unique else dirs


def lfq_model_dir(scale, seed, variant, name):
    return f"{RESULTS}/{scale}/lfq/models/{seed}/{variant}-{name}"


def lfq_models(scale, seed, name):
    """Every quantized model directory of one seed and setting, in the order of `variants`."""
    return [lfq_model_dir(scale, seed, v, name) for v in lfq_variants(scale)]


def lfq_evals(scale):
    """Every evaluation file: one per (quantization seed, setting)."""
    return [f"{RESULTS}/{scale}/lfq/eval/{seed}/{s}.json" for seed in lfq_seeds(scale) for s in lfq_settings(scale)]


# ---- GPU job sizes
def lfq_model_spec(scale):
    b = hp(scale, "lfq", "base")
    return own_or_hub(b["hub_id"], b["model"])


def lfq_train_fp_job(wc):
    """Paper scale: the hub model loaded, checked on a few validation windows, saved."""
    b = hp(wc.scale, "lfq", "base")
    return R.infer_job(
        [R.Infer(lfq_model_spec(wc.scale), seqs=b["val_batches"], prompt=b["seq_len"])], label="lfq_train_fp"
    )


def lfq_ptq_job(scale, method, final_only, label):
    """Block-wise PTQ over the calibration windows: the bf16 model, the fp32 inputs and outputs
    of the block at work for every window, and (OmniQuant, LFQ) AdamW on one block's parameters
    for `epochs` passes; LFQ re-trains only the final block through the LM head."""
    s, c, q = lfq_model_spec(scale), hp(scale, "lfq", "calib"), hp(scale, "lfq", "quant")
    tokens, block = c["n_samples"] * c["seq_len"], R.layer_params(s)
    io = 2 * tokens * s.d_model * 4
    forward = R.forward_flops(s, tokens, c["seq_len"] / 2)
    if final_only:
        trained = 2 * (block + s.vocab * s.d_model) * tokens * 3 * q["epochs"]
    else:
        trained = {"omni": 3 * q["epochs"], "gptq": 1, "rtn": 0}[method] * forward
    seconds = R.compute_seconds(forward + trained, "train")
    return R.size(
        sharded=R.weight_bytes(s) + io + R.TRAIN_BYTES["adamw"] * block,
        seconds=seconds,
        load=R.weight_bytes(s),
        host=2 * R.weight_bytes(s),
        label=label,
    )


def lfq_packed_job(scale, methods, final_only, label):
    """Several PTQ runs of one seed and setting in one process, one after another: their compute
    adds; memory is one run's plus one more copy of the weights (the FP model is kept while a
    copy is quantized; the last baseline, and each final block, is done in place)."""
    s = lfq_model_spec(scale)
    c, q = hp(scale, "lfq", "calib"), hp(scale, "lfq", "quant")
    tokens, block = c["n_samples"] * c["seq_len"], R.layer_params(s)
    forward = R.forward_flops(s, tokens, c["seq_len"] / 2)
    seconds = 0.0
    for m in methods:
        if final_only:
            seconds += R.compute_seconds(
                forward + 2 * (block + s.vocab * s.d_model) * tokens * 3 * q["epochs"], "train"
            )
        else:
            seconds += R.compute_seconds(forward * (1 + {"omni": 3 * q["epochs"], "gptq": 1, "rtn": 0}[m]), "train")
    io = 2 * tokens * s.d_model * 4
    return R.size(
        sharded=2 * R.weight_bytes(s) + io + R.TRAIN_BYTES["adamw"] * block,
        seconds=seconds,
        load=2 * R.weight_bytes(s) if final_only else R.weight_bytes(s),
        host=3 * R.weight_bytes(s),
        label=label,
    )


def lfq_quantize_job(wc):
    return lfq_packed_job(wc.scale, LFQ_BASELINES, False, "lfq_quantize")


def lfq_final_job(wc):
    return lfq_packed_job(wc.scale, [v.split("-")[0] for v in LFQ_FINALS], True, "lfq_final")


def lfq_evaluate_job(wc):
    """The FP model and every variant of one setting: perplexity and KL windows, greedy EM on
    the running-sum prompts, and the lm-eval tasks."""
    e, s = hp(wc.scale, "lfq", "eval"), lfq_model_spec(wc.scale)
    per_model = [
        R.Infer(s, seqs=e["n_ppl_seqs"] + e["n_kl_seqs"], prompt=e["seq_len"], batch=e["batch_size"]),
        R.Infer(
            s,
            seqs=hp(wc.scale, "lfq", "data", "n_eval") * len(e["buckets"]),
            prompt=R.PROMPT_TOKENS,
            gen=4 * max(e["buckets"]),
            batch=e["batch_size"],
        ),
    ]
    per_model += R.lm_eval_works(s, e["lm_eval_tasks"], batch=e["batch_size"], limit=e["lm_eval_limit"])
    return R.infer_job(per_model * (1 + len(hp(wc.scale, "lfq", "variants"))), label="lfq_evaluate")
