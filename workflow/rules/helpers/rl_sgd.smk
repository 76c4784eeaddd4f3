# rl_sgd's helpers (its rules, workflow/rules/rl_sgd.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def rl_sgd_run_keys(scale):
    """(width, optimizer, lr, seed) of every GRPO run: the AdamW and SGD grids at every width
    (all seeds at the widest, the first seed elsewhere) and the ablations at the widest width,
    every seed (R5 is decided over seeds)."""
    widths, seeds = sorted(hp(scale, "rl_sgd", "widths")), hp(scale, "rl_sgd", "seeds")
    keys = [(w, o, lr, s) for w in widths for o in ("adamw", "sgd") for lr in hp(scale, "rl_sgd", "grid", o)
            for s in (seeds if w == widths[-1] else seeds[:1])]
    keys += [(widths[-1], o, lr, s) for o, lr in sorted(hp(scale, "rl_sgd", "ablation").items()) for s in seeds]
    return keys


def rl_sgd_runs(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/runs/d{w}_{o}_lr{fmt(lr)}_s{s}" for w, o, lr, s in rl_sgd_run_keys(scale)]


def rl_sgd_bases(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/base/d{w}" for w in sorted(hp(scale, "rl_sgd", "widths"))]


def rl_sgd_warmstart_cfg(scale):
    return {**hp(scale, "rl_sgd", "warmstart"), "widths": hp(scale, "rl_sgd", "widths")}


def rl_sgd_sft_cfg(scale):
    """The `sft` section plus the seeds: the SFT contrast runs once per seed of `rl_sgd.seeds`."""
    return {**hp(scale, "rl_sgd", "sft"), "seeds": hp(scale, "rl_sgd", "seeds")}


def rl_sgd_analysis_cfg(scale):
    cfg = hp(scale, "rl_sgd")
    return {**cfg["analysis"], "widths": cfg["widths"], "grid": cfg["grid"], "ablation": cfg["ablation"]}


# ---- GPU job sizes
RL_SGD_OPTIMIZER = {"adamw": "adamw", "adam_nomom": "adam", "adam_noadapt": "adam", "sgd": "sgd",
                    "sgd_mom": "sgd_momentum"}  # optimizer wildcard → its state in R.TRAIN_BYTES


def rl_sgd_model_spec(scale, width):
    """The hub base of a width (hub.models by hidden size), else the warm-start architecture."""
    for m in hp(scale, "rl_sgd", "hub", "models"):
        try:
            spec = hub_spec(m)
        except KeyError:
            continue
        if spec.d_model == int(width):
            return spec
    a = hp(scale, "rl_sgd", "warmstart", "arch")
    model = {"d_model": int(width), "n_layers": a["n_layers"], "n_heads": a["n_heads"], "n_kv_heads": None,
             "d_ff": int(int(width) * a["ff_mult"]), "max_seq_len": a["max_seq_len"], "tie_embeddings": True}
    return R.spec_from_config(model, R.CHAR_VOCAB)


def rl_sgd_warmstart_job(wc):
    w = hp(wc.scale, "rl_sgd", "warmstart")
    steps = w["steps"][sorted(hp(wc.scale, "rl_sgd", "widths")).index(int(wc.rs_w))]
    s = rl_sgd_model_spec(wc.scale, wc.rs_w)
    if not steps:  # the hub checkpoint is the base: loaded, rounded to bf16, saved
        return R.load_job(s, label="rl_sgd_warmstart")
    seq = w["arch"]["max_seq_len"]
    return R.train_job(s, tokens=steps * w["batch_size"] * seq, seq=seq, batch=w["batch_size"],
                       label="rl_sgd_warmstart")


def rl_sgd_grpo_job(wc):
    """steps x n_prompts x group_size rollouts of up to max_new tokens (generated in this
    process), one old-policy scoring pass and one training pass over them."""
    g, s = hp(wc.scale, "rl_sgd", "grpo"), rl_sgd_model_spec(wc.scale, wc.rs_w)
    seqs, seq = g["steps"] * g["n_prompts"] * g["group_size"], R.PROMPT_TOKENS + g["max_new"]
    batch = min(g["n_prompts"] * g["group_size"], R.DECODE_BATCH)
    also = (R.Infer(s, seqs=seqs, prompt=R.PROMPT_TOKENS, gen=g["max_new"], batch=batch, shared=True),
            R.Infer(s, seqs=seqs, prompt=seq, batch=1, shared=True))
    ref = R.weight_bytes(s) if g["beta"] else 0.0
    return R.train_job(s, tokens=seqs * seq, seq=seq, batch=g["n_prompts"] * g["group_size"],
                       optimizer=RL_SGD_OPTIMIZER[wc.rs_opt], also=also, extra_bytes=ref, label="rl_sgd_grpo")


def rl_sgd_sft_job(wc):
    sf = hp(wc.scale, "rl_sgd", "sft")
    s = rl_sgd_model_spec(wc.scale, max(hp(wc.scale, "rl_sgd", "widths")))
    runs = len(sf["lrs"]) * len(hp(wc.scale, "rl_sgd", "seeds"))
    return R.train_job(s, tokens=runs * sf["steps"] * sf["batch_size"] * R.PROMPT_TOKENS, seq=R.PROMPT_TOKENS,
                       batch=sf["batch_size"], label="rl_sgd_sft")
