# Verbalized Sampling's helpers (its rules, workflow/rules/verbalized_sampling.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def verbalized_sampling_sample_cfg(scale, vsmodel):
    """The sample step's config for one model: `generator` = that model's spec from
    `sample.generators` (backend null = the DAG's tiny LM)."""
    cfg = dict(hp(scale, "verbalized_sampling", "sample"))
    # a generator that says `serve: <name>` gets its server's address file (base_url_file)
    cfg["generator"] = served_spec(scale, "verbalized_sampling", cfg.pop("generators")[vsmodel])
    return cfg


def verbalized_sampling_tiny_model(scale, vsmodel):
    """The DAG's tiny LM the sample step reads: only for a generator without a backend (a served or
    hosted model samples over HTTP, so the paper scale trains no tiny LM it would not read)."""
    if hp(scale, "verbalized_sampling", "sample", "generators")[vsmodel].get("backend"):
        return []
    return f"{RESULTS}/{scale}/verbalized_sampling/models/{vsmodel}"


def verbalized_sampling_model_arg(model):
    """`--model <dir>` for the tiny LM, nothing for an HTTP generator."""
    import shlex

    return f"--model {shlex.quote(str(model))}" if model else ""


def verbalized_sampling_served(scale, vsmodel):
    """The address file of the server the generator talks to ([] for the tiny LM or a fixed base_url)."""
    return served_inputs(
        scale, "verbalized_sampling", [hp(scale, "verbalized_sampling", "sample", "generators")[vsmodel]]
    )


# ---- GPU job sizes
def verbalized_sampling_model_spec(scale):
    return R.spec_from_config(hp(scale, "verbalized_sampling", "pretrain", "model"), R.CHAR_VOCAB)


def verbalized_sampling_pretrain_job(wc):
    p = hp(wc.scale, "verbalized_sampling", "pretrain")
    seq = p["model"]["max_seq_len"]
    return R.train_job(
        verbalized_sampling_model_spec(wc.scale),
        tokens=train_tokens(p["train"], seq),
        seq=seq,
        batch=p["train"]["batch_size"],
        label="verbalized_sampling_pretrain",
    )


def verbalized_sampling_dpo_job(wc):
    cfg = hp(wc.scale, "verbalized_sampling")
    d, seq = cfg["dpo"], cfg["pretrain"]["model"]["max_seq_len"]
    s = verbalized_sampling_model_spec(wc.scale)  # chosen + rejected through the policy, and the frozen reference
    return R.train_job(
        s,
        tokens=2 * train_tokens(d["train"], seq),
        seq=seq,
        batch=2 * d["train"]["batch_size"],
        extra_bytes=R.weight_bytes(s),
        label="verbalized_sampling_dpo",
    )


def verbalized_sampling_sample_job(wc):
    """An HTTP client of the generator endpoint where the config names one (no GPU), else the
    tiny model sampling every method."""
    sm = hp(wc.scale, "verbalized_sampling", "sample")
    gen = (sm.get("generators") or {}).get(wc.vsmodel) if "generators" in sm else sm.get("generator")
    if (gen or {}).get("backend"):
        return None
    n = sm["n"] * len(sm["methods"]) * hp(wc.scale, "verbalized_sampling", "world", "n_topics")
    return R.infer_job(
        [
            R.Infer(
                verbalized_sampling_model_spec(wc.scale),
                seqs=n,
                prompt=R.PROMPT_TOKENS,
                gen=sm["max_new_tokens"],
                batch=R.DECODE_BATCH,
            )
        ],
        label="verbalized_sampling_sample",
    )
