# SiameseNorm's helpers (its rules, workflow/rules/siamesenorm.smk, include this file first):
# config sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job;
# workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps them out of rules files.


def siamesenorm_runs(scale):
    """Every (scheme, lr, seed) run directory of the sweep."""
    cfg = hp(scale, "siamesenorm")
    return [
        f"{RESULTS}/{scale}/siamesenorm/runs/{s}_lr{fmt(lr)}_s{seed}"
        for s in cfg["schemes"]
        for lr in cfg["lrs"]
        for seed in cfg["seeds"]
    ]


def siamesenorm_steptime_cfg(scale):
    """The step-time section plus the sweep's model, batch shape and schemes."""
    cfg = hp(scale, "siamesenorm")
    run = cfg["run"]
    return {
        **cfg["steptime"],
        "model": run["model"],
        "schemes": cfg["schemes"],
        "batch_size": run["train"]["batch_size"],
        "seq_len": run["seq_len"],
    }


# ---- GPU job sizes
def siamesenorm_model_spec(scale):
    cfg = hp(scale, "siamesenorm")
    return R.spec_from_config(cfg["run"]["model"], cfg["steptime"]["vocab_size"])


def siamesenorm_train_job(wc):
    run = hp(wc.scale, "siamesenorm", "run")
    t = run["train"]
    return R.train_job(
        siamesenorm_model_spec(wc.scale),
        tokens=train_tokens(t, run["seq_len"]),
        seq=run["seq_len"],
        batch=t["batch_size"],
        optimizer=t["optimizer"],
        parallel=True,
        replicated=ddp_replicas(wc.scale),
        label="siamesenorm_train",
    )


def siamesenorm_steptime_job(wc):
    c, st = siamesenorm_steptime_cfg(wc.scale), hp(wc.scale, "siamesenorm", "steptime")
    steps = len(c["schemes"]) * (st["warmup"] + st["rounds"])
    return R.train_job(
        siamesenorm_model_spec(wc.scale),
        tokens=steps * c["batch_size"] * c["seq_len"],
        seq=c["seq_len"],
        batch=c["batch_size"],
        label="siamesenorm_steptime",
    )


def siamesenorm_evaluate_job(wc):
    e, spec = hp(wc.scale, "siamesenorm", "eval"), siamesenorm_model_spec(wc.scale)
    per_run = R.lm_eval_works(spec, e["tasks"], batch=e["batch_size"], limit=e["limit"], max_gen=e["max_gen_toks"])
    works = [w for _ in siamesenorm_runs(wc.scale) for w in per_run]
    return R.infer_job(works, label="siamesenorm_evaluate")
