# DIBJudge's helpers (its rules, workflow/rules/dibjudge.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def dibjudge_metrics(scale):
    """metrics_<variant>.json of every judge variant."""
    return [f"{RESULTS}/{scale}/dibjudge/metrics_{v}.json" for v in hp(scale, "dibjudge", "variants")]


# ---- GPU job sizes
def dibjudge_train_job(wc):
    """Paper scale: the judge with LoRA r16, and (DIB variants) the bottleneck encoder
    trained in full, on pairs of up to max_len tokens, once per seed."""
    t = hp(wc.scale, "dibjudge", "train")
    judge, seq = hub_spec(t["hub"]["judge"]), t["model"]["max_len"]
    tokens = len(t["seeds"]) * t["steps"] * t["batch_size"] * seq
    enc_bytes = enc_s = 0.0
    if wc.variant != "sft":
        enc = hub_spec(t["hub"]["encoder"])
        enc_bytes = R.train_state_bytes(enc) + R.activation_bytes(enc, 1, seq)
        enc_s = R.compute_seconds(R.train_flops(enc, tokens, seq), "train")
    return R.train_job(judge, tokens=tokens, seq=seq, batch=t["batch_size"],
                       trainable=R.lora_params(judge) / R.param_count(judge), extra_bytes=enc_bytes,
                       extra_seconds=enc_s, label="dibjudge_train")
