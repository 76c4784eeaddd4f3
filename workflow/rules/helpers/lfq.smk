# LFQ's helpers (its rules, workflow/rules/lfq.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def lfq_setting_name(setting):
    """A quantization setting as it appears in paths: bits 3, group 32 → w3g32."""
    return f"w{setting['bits']}g{setting['group_size']}"


def lfq_settings(scale):
    return [lfq_setting_name(s) for s in hp(scale, "lfq", "settings")]


def lfq_quant_cfg(scale, name):
    """The `quant` section plus the bits and group size of setting `name`."""
    (s,) = [s for s in hp(scale, "lfq", "settings") if lfq_setting_name(s) == name]
    return {**hp(scale, "lfq", "quant"), "bits": s["bits"], "group_size": s["group_size"]}


def lfq_models(scale, name):
    """Every quantized model directory of one setting, in the order of `variants`."""
    return [f"{RESULTS}/{scale}/lfq/models/{v}-{name}" for v in hp(scale, "lfq", "variants")]


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


def lfq_quantize_job(wc):
    return lfq_ptq_job(wc.scale, wc.method, False, "lfq_quantize")


def lfq_final_job(wc):
    return lfq_ptq_job(wc.scale, wc.method, True, "lfq_final")


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
