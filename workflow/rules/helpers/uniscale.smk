# UniScale's helpers (its rules, workflow/rules/uniscale.smk, include this file first): the GPU
# job size of its table step, `<rule>_job(wc)` (an R.Job; workflow/rules/sizes.smk), from the
# shared model pool's members and verifier (workflow/rules/helpers/model_pool.smk). Functions
# only: Snakemake's linter keeps them out of rules files.


def uniscale_build_table_job(wc):
    """Per member: greedy, max(bon) shared best-of-N samples and the verifier-guided beam
    (beam_bs x beam_cp candidates) on every query, up to max_new_tokens each; the verifier,
    resident beside each member, scores every sample."""
    t = hp(wc.scale, "uniscale", "table")
    members, verifier = model_pool_specs(wc.scale)
    samples = t["n_queries"] * (1 + max(t["bon"] or [0]) + t["beam_cp"] * t["beam_bs"])
    batch = min(max(t["bon"] or [1]), R.DECODE_BATCH)
    works = [R.Infer(s, seqs=samples, prompt=R.PROMPT_TOKENS, gen=t["max_new_tokens"], batch=batch) for s in members]
    works += [R.Infer(verifier, seqs=samples * len(members), prompt=R.PROMPT_TOKENS + t["max_new_tokens"], batch=batch)]
    return R.infer_job(works, extra_bytes=R.weight_bytes(verifier), label="uniscale_build_table")


def uniscale_queries_dir(wc):
    """The query stream of the table and the bandit: the benchmark queries (`uniscale.queries`
    set, paper scale) or the shared pool's generated ones."""
    if SCALES[wc.scale]["uniscale"].get("queries"):
        return f"{RESULTS}/{wc.scale}/uniscale/queries"
    return f"{RESULTS}/{wc.scale}/model_pool/data"
