# DIBJudge's helpers (its rules, workflow/rules/dibjudge.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def dibjudge_metrics(scale):
    """metrics_<variant>.json of every judge variant."""
    return [f"{RESULTS}/{scale}/dibjudge/metrics_{v}.json" for v in hp(scale, "dibjudge", "variants")]


# ---- GPU job sizes
def dibjudge_data_job(wc):
    """Paper scale: the judge LM's NLL of every training response and two translations (to
    English and back) of both responses of up to n_test non-English pairs per group and
    benchmark; None (no GPU) with the synthetic data."""
    t, d = hp(wc.scale, "dibjudge", "train"), hp(wc.scale, "dibjudge", "data")
    if not t["hub"]["judge"]:
        return None
    judge, seq = hub_spec(t["hub"]["judge"]), t["model"]["max_len"]
    n_mt = 2 * 2 * 2 * d["n_test"] * len(t["hub"]["eval_data"])  # 2 groups x 2 responses x 2 directions
    return R.infer_job(
        [
            R.Infer(judge, seqs=2 * t["hub"]["train_pairs"], prompt=seq, batch=8),
            R.Infer(judge, seqs=n_mt, prompt=R.PROMPT_TOKENS, gen=R.PROMPT_TOKENS, batch=8),
        ],
        label="dibjudge_data",
    )


def dibjudge_train_job(wc):
    """Paper scale: the judge with LoRA r16 on both responses of batch_size pairs per step (one
    forward), and (DIB variants) the frozen encoder's forward over the responses (at most half
    of max_len tokens each), once per seed."""
    t = hp(wc.scale, "dibjudge", "train")
    judge, seq = hub_spec(t["hub"]["judge"]), t["model"]["max_len"]
    seqs = len(t["seeds"]) * t["steps"] * 2 * t["batch_size"]
    also = ()
    if wc.variant != "sft":
        enc = hub_spec(t["hub"]["encoder"])
        also = (R.Infer(enc, seqs=seqs, prompt=seq // 2, batch=2 * t["batch_size"]),)
    return R.train_job(
        judge,
        tokens=seqs * seq,
        seq=seq,
        batch=2 * t["batch_size"],
        trainable=R.lora_params(judge) / R.param_count(judge),
        also=also,
        label="dibjudge_train",
    )
