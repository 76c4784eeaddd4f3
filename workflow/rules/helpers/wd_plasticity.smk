# wd_plasticity's helpers (its rules, workflow/rules/wd_plasticity.smk, include this file first):
# config sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job;
# workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps them out of rules files.


def wd_plasticity_tasks(scale):
    return sorted(hp(scale, "wd_plasticity", "world", "tasks"))


def wd_plasticity_base_keys(scale):
    """(λ, seed) of every base, as they appear in paths."""
    cfg = hp(scale, "wd_plasticity")
    return [(fmt(w), s) for w in cfg["weight_decays"] for s in cfg["seeds"]]


def wd_plasticity_finetuned(wc, kind):
    """The fine-tuned model dirs (kind="model") or metrics (kind="metrics") of one base, in
    the order of `wd_plasticity_tasks`."""
    base = f"{RESULTS}/{wc.scale}/wd_plasticity/ft/wd{wc.wd}_s{wc.seed}"
    ext = "" if kind == "model" else ".json"
    return [f"{base}/{t}{ext}" for t in wd_plasticity_tasks(wc.scale)]


def wd_plasticity_per_base(scale, what):
    """One path per base (λ, seed): its model dir (what="base"), probes or eval file."""
    pattern = {
        "base": f"{RESULTS}/{scale}/wd_plasticity/base/wd{{}}_s{{}}",
        "probes": f"{RESULTS}/{scale}/wd_plasticity/probes/wd{{}}_s{{}}.json",
        "eval": f"{RESULTS}/{scale}/wd_plasticity/eval/wd{{}}_s{{}}.json",
    }[what]
    return [pattern.format(w, s) for w, s in wd_plasticity_base_keys(scale)]


# ---- GPU job sizes
def wd_plasticity_model_spec(scale):
    cfg = hp(scale, "wd_plasticity")
    return R.spec_from_config(cfg["pretrain"]["model"], cfg["tokenizer"]["vocab_size"])


def wd_plasticity_pretrain_job(wc):
    pre = hp(wc.scale, "wd_plasticity", "pretrain")
    t = pre["train"]
    return R.train_job(
        wd_plasticity_model_spec(wc.scale),
        tokens=train_tokens(t, pre["seq_len"]),
        seq=pre["seq_len"],
        batch=t["batch_size"],
        optimizer=t["optimizer"],
        parallel=True,
        replicated=ddp_replicas(wc.scale),
        label="wd_plasticity_pretrain",
    )


def wd_plasticity_finetune_job(wc):
    ft, seq = hp(wc.scale, "wd_plasticity", "finetune"), hp(wc.scale, "wd_plasticity", "pretrain", "seq_len")
    t = ft["train"]  # one run per LR of the grid, in this job
    return R.train_job(
        wd_plasticity_model_spec(wc.scale),
        tokens=len(ft["lrs"]) * train_tokens(t, seq),
        seq=seq,
        batch=t["batch_size"],
        optimizer=t["optimizer"],
        label="wd_plasticity_finetune",
    )


def wd_plasticity_evaluate_job(wc):
    """The base and one fine-tuned model per task, each on every task's test split: a
    loglikelihood and a generation request per item."""
    e, tasks = hp(wc.scale, "wd_plasticity", "eval"), hp(wc.scale, "wd_plasticity", "world", "tasks")
    items = sum(min(t["n_test"], e["limit"] or t["n_test"]) for t in tasks.values())
    spec = wd_plasticity_model_spec(wc.scale)
    w = R.Infer(spec, seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_gen_toks"], batch=e["batch_size"])
    ll = R.Infer(spec, seqs=items, prompt=R.PROMPT_TOKENS, batch=e["batch_size"])
    return R.infer_job([w, ll] * (1 + len(tasks)), label="wd_plasticity_evaluate")


def wd_plasticity_probes_job(wc):
    p, seq = hp(wc.scale, "wd_plasticity", "probes"), hp(wc.scale, "wd_plasticity", "pretrain", "seq_len")
    seqs = p["loss_batches"] * p["batch_size"] + p["n_val_sequences"]
    return R.infer_job(
        [R.Infer(wd_plasticity_model_spec(wc.scale), seqs=seqs, prompt=seq, batch=p["batch_size"])],
        label="wd_plasticity_probes",
    )
