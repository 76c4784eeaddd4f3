# FusionRoute's helpers (its rules, workflow/rules/fusionroute.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def fusionroute_section(scale, section, seed):
    """A step's section for replicate `seed` (methods/fusionroute/config.py `replicate_section`)."""
    from methods.fusionroute.config import replicate_section

    return replicate_section(hp(scale, "fusionroute", section), seed)


def fusionroute_cfg(scale, section, seed, **extra):
    """A step's section for replicate `seed` with the `hub` section beside it."""
    return {**fusionroute_section(scale, section, seed), "hub": hp(scale, "fusionroute", "hub"), **extra}


def fusionroute_data_cfg(scale, seed):
    """The data step's section; at paper scale (hub router named) with the `hub` section beside
    it (the SFT records come from hub.datasets), below exactly the data section."""
    cfg = fusionroute_section(scale, "data", seed)
    if hp(scale, "fusionroute", "hub")["router_base"]:
        return {**cfg, "hub": hp(scale, "fusionroute", "hub")}
    return cfg


def fusionroute_train_seed(seed):
    """The data-mixture / batch-order seed of the expert and router steps of replicate `seed`."""
    from methods.fusionroute.config import SEED_STRIDE

    return SEED_STRIDE * int(seed)


def fusionroute_experts(scale, seed):
    """The expert directories of replicate `seed` in the order of the routing head (add, rev, brk)."""
    return [f"{RESULTS}/{scale}/fusionroute/seed{seed}/experts/{k}" for k in ("add", "rev", "brk")]


def fusionroute_evals(scale):
    """Every replicate's evaluation (the aggregate step pools them)."""
    return [f"{RESULTS}/{scale}/fusionroute/seed{s}/metrics.json" for s in hp(scale, "fusionroute", "seeds")]


# ---- GPU job sizes
def fusionroute_train_expert_job(wc):
    h, e = hp(wc.scale, "fusionroute", "hub"), hp(wc.scale, "fusionroute", "expert")
    if h["experts"].get(wc.domain):  # a hub expert: a pointer
        return None
    seq = e["model"]["max_seq_len"]
    return R.train_job(
        R.spec_from_config(e["model"], R.CHAR_VOCAB),
        tokens=train_tokens(e["train"], seq),
        seq=seq,
        batch=e["train"]["batch_size"],
        label="fusionroute_train_expert",
    )


def fusionroute_model_specs(scale):
    """(router spec, [expert specs]): the hub models at paper scale, else the tiny shapes."""
    h = hp(scale, "fusionroute", "hub")
    if h["router_base"]:
        return hub_spec(h["router_base"]), [hub_spec(h["experts"][d]) for d in ("add", "rev", "brk")]
    tiny = lambda sec: R.spec_from_config(hp(scale, "fusionroute", sec, "model"), R.CHAR_VOCAB)
    return tiny("router"), [tiny("expert")] * 3


def fusionroute_seq_len(scale):
    cfg = hp(scale, "fusionroute")
    return (
        (cfg["router"].get("max_len") or R.SEQ_TOKENS)
        if cfg["hub"]["router_base"]
        else cfg["router"]["model"]["max_seq_len"]
    )


def fusionroute_sft_router_job(wc):
    """Router SFT (all weights) with the three experts' forwards on the same sequences (the
    routing targets on disagreement tokens)."""
    router, experts = fusionroute_model_specs(wc.scale)
    t, seq = hp(wc.scale, "fusionroute", "router", "train"), fusionroute_seq_len(wc.scale)
    n = t["steps"] * t["batch_size"]
    also = tuple(R.Infer(e, seqs=n, prompt=seq, batch=1) for e in experts)
    return R.train_job(
        router, tokens=n * seq, seq=seq, batch=t["batch_size"], also=also, label="fusionroute_sft_router"
    )


def fusionroute_cdpo_job(wc):
    """Preference pairs from the SFT FusionRoute (router + experts decoding together), then DPO of
    the router (chosen + rejected) against its frozen SFT copy."""
    router, experts = fusionroute_model_specs(wc.scale)
    c, ev, seq = hp(wc.scale, "fusionroute", "cdpo"), hp(wc.scale, "fusionroute", "eval"), fusionroute_seq_len(wc.scale)
    gen = [
        R.Infer(m, seqs=c["n_prefs"], prompt=R.PROMPT_TOKENS, gen=ev["max_new_tokens"], batch=1, shared=m is router)
        for m in [router] + experts
    ]
    n = c["train"]["steps"] * c["train"]["batch_size"]
    also = tuple(gen) + (R.Infer(router, seqs=2 * n, prompt=seq, batch=1),)
    return R.train_job(
        router, tokens=2 * n * seq, seq=seq, batch=2 * c["train"]["batch_size"], also=also, label="fusionroute_cdpo"
    )


def fusionroute_eval_job(wc):
    """Every system on the evaluation tasks (paper: hub.lm_eval_tasks): the three experts alone
    and the two FusionRoute routers, each decoding with all four models resident."""
    router, experts = fusionroute_model_specs(wc.scale)
    ev, tasks = hp(wc.scale, "fusionroute", "eval"), hp(wc.scale, "fusionroute", "hub", "lm_eval_tasks")
    if hp(wc.scale, "fusionroute", "hub", "router_base"):
        run = lambda s: R.lm_eval_works(s, tasks, batch=ev["batch_size"])
    else:
        n = hp(wc.scale, "fusionroute", "data", "n_test") * 4
        seq = fusionroute_seq_len(wc.scale)
        run = lambda s: [R.Infer(s, seqs=n, prompt=seq, gen=ev["max_new_tokens"], batch=ev["batch_size"])]
    works = [w for e in experts for w in run(e)] + [w for _ in range(2) for m in [router] + experts for w in run(m)]
    resident = sum(R.weight_bytes(m) for m in [router] + experts) - max(R.weight_bytes(m) for m in [router] + experts)
    return R.infer_job(works, extra_bytes=resident, label="fusionroute_eval")
