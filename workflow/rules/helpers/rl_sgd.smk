# rl_sgd's helpers (its rules, workflow/rules/rl_sgd.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def rl_sgd_on_hub(scale):
    """The hub path (`hub.models` set: the bases are hub models) or the tiny path (`widths`)."""
    return bool(hp(scale, "rl_sgd", "hub")["models"])


def rl_sgd_base_keys(scale):
    """The bases, narrowest first: d<width> per width (tiny), m<i> per hub.models entry (hub path,
    in the config's order: the first and last are the width comparison, the last the main model)."""
    if rl_sgd_on_hub(scale):
        return [f"m{i}" for i in range(len(hp(scale, "rl_sgd", "hub")["models"]))]
    return [f"d{w}" for w in sorted(hp(scale, "rl_sgd", "widths"))]


def rl_sgd_run_keys(scale):
    """(base, optimizer, lr, seed) of every GRPO run: the AdamW and SGD grids from every base
    (all seeds from the narrowest and the widest / main one, whose per-seed ratios decide R2a and
    R2b; the first seed elsewhere) and the ablations from the widest, every seed (R5 is decided
    over seeds)."""
    bases, seeds = rl_sgd_base_keys(scale), hp(scale, "rl_sgd", "seeds")
    keys = [
        (b, o, lr, s)
        for b in bases
        for o in ("adamw", "sgd")
        for lr in hp(scale, "rl_sgd", "grid", o)
        for s in (seeds if b in (bases[0], bases[-1]) else seeds[:1])
    ]
    keys += [(bases[-1], o, lr, s) for o, lr in sorted(hp(scale, "rl_sgd", "ablation").items()) for s in seeds]
    return keys


def rl_sgd_runs(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/runs/{b}_{o}_lr{fmt(lr)}_s{s}" for b, o, lr, s in rl_sgd_run_keys(scale)]


def rl_sgd_bases(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/base/{b}" for b in rl_sgd_base_keys(scale)]


def rl_sgd_main_base(scale):
    """The widest base (tiny) or the main hub model (the last of hub.models)."""
    return rl_sgd_bases(scale)[-1]


def rl_sgd_hub_step(**parts):
    """A hub-path step's config: its parts nested under `hub_path` (how the step CLI tells the
    two paths apart)."""
    return {"hub_path": parts}


def rl_sgd_prompts_cfg(scale):
    if rl_sgd_on_hub(scale):
        h = hp(scale, "rl_sgd", "hub")
        return rl_sgd_hub_step(
            data=hp(scale, "rl_sgd", "data"), rl_dataset=h["rl_dataset"], eval_datasets=h["eval_datasets"]
        )
    return hp(scale, "rl_sgd", "prompts")


def rl_sgd_warmstart_cfg(scale, key):
    if rl_sgd_on_hub(scale):
        return rl_sgd_hub_step(
            hub_id=hp(scale, "rl_sgd", "hub")["models"][int(key[1:])], key=key, eval=hp(scale, "rl_sgd", "eval")
        )
    return {**hp(scale, "rl_sgd", "warmstart"), "widths": hp(scale, "rl_sgd", "widths")}


def rl_sgd_grpo_cfg(scale):
    if rl_sgd_on_hub(scale):
        return rl_sgd_hub_step(grpo=hp(scale, "rl_sgd", "grpo"), eval=hp(scale, "rl_sgd", "eval"))
    return hp(scale, "rl_sgd", "grpo")


def rl_sgd_sft_cfg(scale):
    """The `sft` section plus the seeds: the SFT contrast runs once per seed of `rl_sgd.seeds`
    (hub path: with held-out decoding, solutions cut at grpo.max_new tokens, grpo.micro_batch)."""
    if rl_sgd_on_hub(scale):
        g = hp(scale, "rl_sgd", "grpo")
        return rl_sgd_hub_step(
            sft=hp(scale, "rl_sgd", "sft"),
            seeds=hp(scale, "rl_sgd", "seeds"),
            eval=hp(scale, "rl_sgd", "eval"),
            max_len=g["max_new"],
            micro_batch=g.get("micro_batch"),
        )
    return {**hp(scale, "rl_sgd", "sft"), "seeds": hp(scale, "rl_sgd", "seeds")}


def rl_sgd_lm_eval_cfg(scale):
    return {"tasks": hp(scale, "rl_sgd", "hub")["lm_eval_tasks"], "eval": hp(scale, "rl_sgd", "eval")}


def rl_sgd_aggregate_extra(wc):
    """The lm-eval scores on the hub path where hub.lm_eval_tasks names any (none on the tiny path)."""
    if rl_sgd_on_hub(wc.scale) and hp(wc.scale, "rl_sgd", "hub")["lm_eval_tasks"]:
        return {"lm_eval": f"{RESULTS}/{wc.scale}/rl_sgd/lm_eval.json"}
    return {}


def rl_sgd_analysis_cfg(scale):
    cfg = hp(scale, "rl_sgd")
    widths = rl_sgd_base_keys(scale) if rl_sgd_on_hub(scale) else cfg["widths"]
    return {**cfg["analysis"], "widths": widths, "grid": cfg["grid"], "ablation": cfg["ablation"]}


# ---- GPU job sizes
RL_SGD_OPTIMIZER = {
    "adamw": "adamw",
    "adam_nomom": "adam",
    "adam_noadapt": "adam",
    "sgd": "sgd",
    "sgd_mom": "sgd_momentum",
}  # optimizer wildcard → its state in R.TRAIN_BYTES


def rl_sgd_model_spec(scale, key):
    """The model of base `key`: hub model i for m<i>, else the warm-start architecture of
    width d for d<d>."""
    if rl_sgd_on_hub(scale):
        return hub_spec(hp(scale, "rl_sgd", "hub")["models"][int(key[1:])])
    width = int(key[1:])
    a = hp(scale, "rl_sgd", "warmstart", "arch")
    model = {
        "d_model": width,
        "n_layers": a["n_layers"],
        "n_heads": a["n_heads"],
        "n_kv_heads": None,
        "d_ff": int(width * a["ff_mult"]),
        "max_seq_len": a["max_seq_len"],
        "tie_embeddings": True,
    }
    return R.spec_from_config(model, R.CHAR_VOCAB)


def rl_sgd_warmstart_job(wc):
    s = rl_sgd_model_spec(wc.scale, wc.rs_b)
    if rl_sgd_on_hub(wc.scale):  # the hub checkpoint is the base: loaded in bf16, scored, saved
        return R.load_job(s, label="rl_sgd_warmstart")
    w = hp(wc.scale, "rl_sgd", "warmstart")
    steps = w["steps"][rl_sgd_base_keys(wc.scale).index(wc.rs_b)]
    if not steps:
        return R.load_job(s, label="rl_sgd_warmstart")
    seq = w["arch"]["max_seq_len"]
    return R.train_job(
        s, tokens=steps * w["batch_size"] * seq, seq=seq, batch=w["batch_size"], label="rl_sgd_warmstart"
    )


def rl_sgd_grpo_job(wc):
    """steps x n_prompts x group_size rollouts of up to max_new tokens (generated in this
    process), one old-policy scoring pass and one training pass over them."""
    g, s = hp(wc.scale, "rl_sgd", "grpo"), rl_sgd_model_spec(wc.scale, wc.rs_b)
    seqs, seq = g["steps"] * g["n_prompts"] * g["group_size"], R.PROMPT_TOKENS + g["max_new"]
    batch = min(g["n_prompts"] * g["group_size"], R.DECODE_BATCH)
    also = (
        R.Infer(s, seqs=seqs, prompt=R.PROMPT_TOKENS, gen=g["max_new"], batch=batch, shared=True),
        R.Infer(s, seqs=seqs, prompt=seq, batch=1, shared=True),
    )
    ref = R.weight_bytes(s) if g["beta"] else 0.0
    return R.train_job(
        s,
        tokens=seqs * seq,
        seq=seq,
        batch=g["n_prompts"] * g["group_size"],
        optimizer=RL_SGD_OPTIMIZER[wc.rs_opt],
        also=also,
        extra_bytes=ref,
        label="rl_sgd_grpo",
    )


def rl_sgd_sft_job(wc):
    sf = hp(wc.scale, "rl_sgd", "sft")
    s = rl_sgd_model_spec(wc.scale, rl_sgd_base_keys(wc.scale)[-1])
    runs = len(sf["lrs"]) * len(hp(wc.scale, "rl_sgd", "seeds"))
    return R.train_job(
        s,
        tokens=runs * sf["steps"] * sf["batch_size"] * R.PROMPT_TOKENS,
        seq=R.PROMPT_TOKENS,
        batch=sf["batch_size"],
        label="rl_sgd_sft",
    )


def rl_sgd_lm_eval_job(wc):
    """Every base and run loaded in turn and scored on hub.lm_eval_tasks (inference only; one
    after the other, so the widest model sets the memory)."""
    e, tasks = hp(wc.scale, "rl_sgd", "eval"), hp(wc.scale, "rl_sgd", "hub")["lm_eval_tasks"]
    keys = [k[0] for k in rl_sgd_run_keys(wc.scale)] + rl_sgd_base_keys(wc.scale)
    works = [
        w
        for k in keys
        for w in R.lm_eval_works(
            rl_sgd_model_spec(wc.scale, k), tasks, batch=e["lm_eval_batch_size"], limit=e["lm_eval_limit"]
        )
    ]
    return R.infer_job(works, label="rl_sgd_lm_eval")
