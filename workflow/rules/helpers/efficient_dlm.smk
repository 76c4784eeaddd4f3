# Efficient-DLM's helpers (its rules, workflow/rules/efficient_dlm.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def efficient_dlm_conversions(scale):
    """The converted model dir of every attention/masking variant and conversion seed at a scale."""
    return [
        f"{RESULTS}/{scale}/efficient_dlm/models/{v}_s{s}"
        for v in hp(scale, "efficient_dlm", "variants")
        for s in hp(scale, "efficient_dlm", "seeds")
    ]


def efficient_dlm_convert_cfg(scale, seed):
    """The convert section plus the conversion seed; where `hub.train_tokens` is set (paper
    scale) it fixes the steps: ceil(train_tokens / (batch_size × seq_len))."""
    c = hp(scale, "efficient_dlm", "convert")
    tokens = hp(scale, "efficient_dlm", "hub").get("train_tokens")
    if tokens:
        per_step = c["train"]["batch_size"] * c["seq_len"]
        c = {**c, "train": {**c["train"], "steps": -(-int(tokens) // per_step)}}
    return {**c, "seed": int(seed)}


def efficient_dlm_data_args(scale):
    """Paper scale (`data.corpus` set): the AR base's tokenizer and the token budget of the corpus shards."""
    import shlex

    if not hp(scale, "efficient_dlm", "data", "corpus"):
        return ""
    args = f"--tokenizer {shlex.quote(str(hp(scale, 'efficient_dlm', 'ar', 'hub_id')))}"
    tokens = hp(scale, "efficient_dlm", "hub")["train_tokens"]
    return args + (f" --tokens {int(tokens)}" if tokens else "")


def efficient_dlm_hub(scale):
    """The hub section (paper scale: lm-eval tasks and AR baselines of the evaluation)."""
    return hp(scale, "efficient_dlm", "hub")


# ---- GPU job sizes
def efficient_dlm_model_spec(scale):
    a = hp(scale, "efficient_dlm", "ar")
    return own_or_hub(a["hub_id"], a["model"])


def efficient_dlm_train_ar_job(wc):
    a = hp(wc.scale, "efficient_dlm", "ar")
    if a["hub_id"]:  # paper scale: the hub base, saved as is
        return R.load_job(efficient_dlm_model_spec(wc.scale), label="efficient_dlm_train_ar")
    return R.train_job(
        efficient_dlm_model_spec(wc.scale),
        tokens=train_tokens(a["train"], a["seq_len"]),
        seq=a["seq_len"],
        batch=a["train"]["batch_size"],
        label="efficient_dlm_train_ar",
    )


def efficient_dlm_convert_job(wc):
    c = efficient_dlm_convert_cfg(wc.scale, 0)
    return R.train_job(
        efficient_dlm_model_spec(wc.scale),
        tokens=train_tokens(c["train"], c["seq_len"]),
        seq=c["seq_len"],
        batch=c["train"]["batch_size"],
        optimizer=c["train"]["optimizer"],
        label="efficient_dlm_convert",
    )


def efficient_dlm_eval_job(wc):
    """AR greedy decoding, then every variant at every threshold decoding block by block: each
    step recomputes its block (upper bound: one token accepted per step)."""
    e, s = hp(wc.scale, "efficient_dlm", "eval"), efficient_dlm_model_spec(wc.scale)
    items = e["n_per_task"] * len(hp(wc.scale, "efficient_dlm", "data", "tasks"))
    ar = R.Infer(s, seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_new"], batch=e["batch_size"])
    dlm = R.Infer(s, seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_new"], batch=e["batch_size"], block=e["block"])
    decodes = len(efficient_dlm_conversions(wc.scale)) * len(e["thresholds"])
    return R.infer_job([ar] + [dlm] * decodes, label="efficient_dlm_eval")
