# DAG-MoE's helpers (its rules, workflow/rules/dag_moe.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job;
# workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps them out of rules files.


def dag_moe_archs(scale):
    return sorted(hp(scale, "dag_moe", "archs"))


def dag_moe_step_cfg(scale, section):
    """The `lm` or `compose` section plus the MoE knobs every architecture shares."""
    return {**hp(scale, "dag_moe", section), "moe": hp(scale, "dag_moe", "moe")}


def dag_moe_runs(scale, what, first_seed_only=False):
    """Every (arch, seed) LM run's model dir (what="model") or metrics (what="metrics"),
    archs sorted; with first_seed_only, one run per arch (the timing step's models)."""
    seeds = hp(scale, "dag_moe", "seeds")[:1] if first_seed_only else hp(scale, "dag_moe", "seeds")
    ext = "" if what == "model" else ".json"
    return [f"{RESULTS}/{scale}/dag_moe/runs/{a}/s{s}{ext}" for a in dag_moe_archs(scale) for s in seeds]


def dag_moe_lm_eval_outputs(scale):
    """Paper scale: one zero-shot lm-eval file per LM run; none where `eval_tasks` is empty."""
    if not hp(scale, "dag_moe", "downstream", "eval_tasks"):
        return []
    return [
        f"{RESULTS}/{scale}/dag_moe/lm_eval/{a}_s{s}.json"
        for a in dag_moe_archs(scale)
        for s in hp(scale, "dag_moe", "seeds")
    ]


def dag_moe_shards(scale):
    """A hub corpus's token shards (paper scale); none for the generated mixture, which makes its
    batches on the fly."""
    return [] if hp(scale, "dag_moe", "data", "source") == "generated" else f"{RESULTS}/{scale}/dag_moe/shards"


# ---- GPU job sizes
def dag_moe_model_spec(scale, arch):
    a, tok = hp(scale, "dag_moe", "archs", arch), hp(scale, "dag_moe", "data", "tokenizer")
    vocab = HUB_MODELS[tok]["vocab"] if tok in HUB_MODELS else R.CHAR_VOCAB
    return R.spec_from_config(
        hp(scale, "dag_moe", "lm", "model"), vocab, n_experts=a["n_experts"], k=a["k"], expert_d_ff=a["d_ff"]
    )


def dag_moe_train_job(wc):
    t, seq = hp(wc.scale, "dag_moe", "lm", "train"), hp(wc.scale, "dag_moe", "data", "seq_len")
    return R.train_job(
        dag_moe_model_spec(wc.scale, wc.arch),
        tokens=train_tokens(t, seq),
        seq=seq,
        batch=t["batch_size"],
        optimizer=t["optimizer"],
        parallel=True,
        replicated=ddp_replicas(wc.scale),
        label="dag_moe_train",
    )


def dag_moe_compose_job(wc):
    c = hp(wc.scale, "dag_moe", "compose")
    spec = R.spec_from_config(c["model"], R.CHAR_VOCAB, n_experts=c["n_experts"], k=c["k"], expert_d_ff=c["d_ff"])
    seq = c["model"]["max_seq_len"]
    return R.train_job(
        spec,
        tokens=len(c["seeds"]) * train_tokens(c["train"], seq),
        seq=seq,
        batch=c["train"]["batch_size"],
        label="dag_moe_compose",
    )


def dag_moe_timing_job(wc):
    tm, seq = hp(wc.scale, "dag_moe", "timing"), hp(wc.scale, "dag_moe", "data", "seq_len")
    specs = [dag_moe_model_spec(wc.scale, a) for a in dag_moe_archs(wc.scale)]
    big = max(specs, key=R.param_count)
    tokens = len(specs) * (tm["warmup"] + tm["reps"]) * tm["batch_size"] * seq
    return R.train_job(big, tokens=tokens, seq=seq, batch=tm["batch_size"], label="dag_moe_timing")


def dag_moe_lm_eval_job(wc):
    d = hp(wc.scale, "dag_moe", "downstream")
    works = R.lm_eval_works(
        dag_moe_model_spec(wc.scale, wc.arch), d["eval_tasks"], batch=hp(wc.scale, "dag_moe", "lm", "eval_batch_size")
    )
    return R.infer_job(works, label="dag_moe_lm_eval")
