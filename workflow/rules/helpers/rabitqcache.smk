# RaBitQCache's helpers (its rules, workflow/rules/rabitqcache.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def rabitqcache_model(scale):
    """The model the capture (estimator statistics) and lm-eval steps use: the first seed's."""
    return f"{RESULTS}/{scale}/rabitqcache/models/s{hp(scale, 'rabitqcache', 'seeds')[0]}"


def rabitqcache_sparse_outputs(scale, seeds=None):
    """One sparse evaluation per trained model (seed), in the order of `rabitqcache.seeds` (or of
    `seeds`: a look's)."""
    seeds = hp(scale, "rabitqcache", "seeds") if seeds is None else seeds
    return [f"{RESULTS}/{scale}/rabitqcache/sparse/s{s}.json" for s in seeds]


def rabitqcache_with_method(scale, section):
    """A step's section (capture, sparse, lm_eval) plus the method settings it runs with."""
    return {**hp(scale, "rabitqcache", section), "method": hp(scale, "rabitqcache", "method")}


def rabitqcache_estimator_cfg(scale):
    """The estimator section plus the region boundaries of the method (skipped layers, I)."""
    m = hp(scale, "rabitqcache", "method")
    return {**hp(scale, "rabitqcache", "estimator"), "min_layer": m["skip_layers"], "interval": m["quantize_interval"]}


def rabitqcache_lm_eval_cfg(scale):
    """The lm_eval section (tasks, limit, its own Top-p, ...) plus the method settings; the step
    runs the method with the section's top_p."""
    return rabitqcache_with_method(scale, "lm_eval")


def rabitqcache_lm_eval_outputs(scale):
    """Paper scale: one lm-eval file; none where `lm_eval.tasks` is empty."""
    return [f"{RESULTS}/{scale}/rabitqcache/lm_eval.json"] if hp(scale, "rabitqcache", "lm_eval", "tasks") else []


# ---- GPU job sizes
RABITQCACHE_TOKENS_PER_WORD = 2.5  # the passkey prompts' random words: ~16k words ≈ 40k Llama tokens (paper.yaml)


def rabitqcache_model_spec(scale):
    b = hp(scale, "rabitqcache", "base")
    return own_or_hub(b["hub_id"], b["model"])


def rabitqcache_prompt_tokens(scale, key):
    return int(hp(scale, "rabitqcache", "data", key) * RABITQCACHE_TOKENS_PER_WORD)


def rabitqcache_train_job(wc):
    b = hp(wc.scale, "rabitqcache", "base")
    prompt = rabitqcache_prompt_tokens(wc.scale, "train_len")
    return R.infer_job(
        [R.Infer(rabitqcache_model_spec(wc.scale), seqs=b["val_texts"], prompt=prompt)], label="rabitqcache_train"
    )


def rabitqcache_capture_job(wc):
    c = hp(wc.scale, "rabitqcache", "capture")
    prompt = rabitqcache_prompt_tokens(wc.scale, "eval_len")
    return R.infer_job(
        [
            R.Infer(
                rabitqcache_model_spec(wc.scale),
                seqs=c["n_prompts"],
                prompt=prompt,
                gen=c["n_steps"],
                batch=c["batch_size"],
            )
        ],
        label="rabitqcache_capture",
    )


def rabitqcache_sparse_job(wc):
    """Per batch one dense prefill (and the no-centre ablation's own), then tail_steps decode
    steps for every selector (dense, RaBitQ and INT4 at each p, top-k / Quest / random at its budgets)."""
    sp = hp(wc.scale, "rabitqcache", "sparse")
    selectors = 1 + 4 * len(sp["top_ps"])
    s, n = rabitqcache_model_spec(wc.scale), rabitqcache_prompt_tokens(wc.scale, "eval_len")
    return R.infer_job(
        [
            R.Infer(s, seqs=2 * sp["n_prompts"], prompt=n, batch=sp["batch_size"]),
            R.Infer(s, seqs=sp["n_prompts"] * selectors, prompt=0, gen=sp["tail_steps"], batch=sp["batch_size"]),
        ],
        label="rabitqcache_sparse",
    )


def rabitqcache_lm_eval_job(wc):
    lm = hp(wc.scale, "rabitqcache", "lm_eval")
    works = R.lm_eval_works(
        rabitqcache_model_spec(wc.scale),
        lm["tasks"],
        batch=lm["batch_size"],
        limit=lm["limit"],
        seq_lengths=lm["metadata"].get("max_seq_lengths"),
    )
    return R.infer_job(works, label="rabitqcache_lm_eval")
