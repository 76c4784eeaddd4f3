# ReMoE's helpers (its rules, workflow/rules/remoe.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def remoe_on_hub(scale):
    """Paper scale: pretrain.hub_id names the released MoE whose routers are fine-tuned."""
    return bool(hp(scale, "remoe", "pretrain")["hub_id"])


def remoe_data_path(scale):
    """The fine-tuning / held-out data: the generated corpus, or (paper scale) the hub
    conversations of remoe_hub_data."""
    d = f"{RESULTS}/{scale}/remoe/data"
    return f"{d}/hub" if remoe_on_hub(scale) else f"{d}/corpus.npz"


def remoe_finetune_cfg(scale, name, seed):
    """The finetune section plus the variant (loss switches) named `name` and the seed, and at
    paper scale the hub section (data, seq_len, grad_accum)."""
    found = [v for v in hp(scale, "remoe", "variants") if v["name"] == name]
    if not found:
        raise WorkflowError(f"remoe: no variant named {name!r} in remoe.variants")
    cfg = {**hp(scale, "remoe", "finetune"), "variant": found[0], "seed": int(seed)}
    if remoe_on_hub(scale):
        cfg["hub"] = hp(scale, "remoe", "hub")
    return cfg


def remoe_trace_cfg(scale):
    cfg = dict(hp(scale, "remoe", "trace"))
    if remoe_on_hub(scale):
        cfg["hub"] = hp(scale, "remoe", "hub")
    return cfg


def remoe_eor_pretrain_cfg(scale):
    """The pretrain section with hub_id = hub.eor_model_id (the second MoE, EOR only)."""
    eor = hp(scale, "remoe", "hub")["eor_model_id"]
    if not eor:
        raise WorkflowError("remoe.hub.eor_model_id is empty at paper scale")
    return {**hp(scale, "remoe", "pretrain"), "hub_id": eor}


def remoe_eor_checkpoints(scale):
    """The second MoE's base routers and its ReMoE fine-tune per seed (paper scale)."""
    d, rm = f"{RESULTS}/{scale}/remoe/eor_model/ckpt", hp(scale, "remoe", "analysis")["remoe"]
    return [f"{d}/base.pt"] + [f"{d}/finetuned/{rm}_s{seed}.pt" for seed in hp(scale, "remoe", "seeds")]


def remoe_lm_eval_checkpoints(scale):
    """The base and the ReMoE fine-tunes (analysis.remoe, every seed): the paper's quality table."""
    rm = hp(scale, "remoe", "analysis")["remoe"]
    return [
        c
        for c in remoe_checkpoints(scale)
        if Path(c).name == "base.pt" or (Path(c).parent.name == "finetuned" and Path(c).name.startswith(f"{rm}_s"))
    ]


def remoe_analyze_inputs(scale):
    """Paper scale: the second MoE's traces and the lm-eval scores."""
    if not remoe_on_hub(scale):
        return {}
    d = f"{RESULTS}/{scale}/remoe"
    return {"eor_traces": f"{d}/eor_model/traces", "lm_eval": f"{d}/lm_eval.json"}


def remoe_analyze_args(wc, input):
    return " ".join(f"--{k} {shell_words(input[k])}" for k in ("eor_traces", "lm_eval") if k in input.keys())


def remoe_checkpoints(scale):
    """The pre-trained checkpoint and one gate-only fine-tune per variant and seed."""
    names = [v["name"] for v in hp(scale, "remoe", "variants")]
    if "base" in names or len(set(names)) != len(names):
        raise WorkflowError("remoe.variants: names must be unique and not 'base'")
    return [f"{RESULTS}/{scale}/remoe/ckpt/base.pt"] + [
        f"{RESULTS}/{scale}/remoe/ckpt/finetuned/{n}_s{seed}.pt" for n in names for seed in hp(scale, "remoe", "seeds")
    ]


# ---- GPU job sizes
def remoe_model_spec(scale):
    p = hp(scale, "remoe", "pretrain")
    if p["hub_id"]:
        return hub_spec(p["hub_id"])
    m = p["moe"]
    return R.spec_from_config(
        p["model"],
        R.CHAR_VOCAB,
        n_experts=m["n_experts"],
        k=m["k"],
        expert_d_ff=m["expert_d_ff"],
        n_shared=m["n_shared"],
    )


def remoe_pretrain_job(wc):
    p = hp(wc.scale, "remoe", "pretrain")
    if p["hub_id"]:  # paper scale: the hub checkpoint is loaded, not pre-trained
        return R.load_job(remoe_model_spec(wc.scale), label="remoe_pretrain")
    return R.train_job(
        remoe_model_spec(wc.scale),
        tokens=train_tokens(p["train"], p["model"]["max_seq_len"]),
        seq=p["model"]["max_seq_len"],
        batch=p["train"]["batch_size"],
        label="remoe_pretrain",
    )


def remoe_finetune_job(wc):
    """Gate-only: the routers train (AdamW), everything else is frozen; micro-batch
    batch / grad_accum sequences of hub.seq_len."""
    s, t, h = remoe_model_spec(wc.scale), hp(wc.scale, "remoe", "finetune", "train"), hp(wc.scale, "remoe", "hub")
    routers = s.n_layers * s.n_experts * s.d_model
    return R.train_job(
        s,
        tokens=train_tokens(t, h["seq_len"]),
        seq=h["seq_len"],
        batch=t["batch_size"],
        trainable=routers / R.param_count(s),
        micro=max(1, t["batch_size"] // max(1, h["grad_accum"])),
        label="remoe_finetune",
    )


def remoe_trace_job(wc):
    tr, seq = hp(wc.scale, "remoe", "trace"), hp(wc.scale, "remoe", "hub", "seq_len")
    seqs = len(remoe_checkpoints(wc.scale)) * tr["n_docs"]
    return R.infer_job(
        [R.Infer(remoe_model_spec(wc.scale), seqs=seqs, prompt=seq, batch=tr["batch_size"])], label="remoe_trace"
    )


def remoe_eor_spec(scale):
    return hub_spec(hp(scale, "remoe", "hub")["eor_model_id"])


def remoe_eor_pretrain_job(wc):
    return R.load_job(remoe_eor_spec(wc.scale), label="remoe_eor_pretrain")


def remoe_eor_finetune_job(wc):
    s, t, h = remoe_eor_spec(wc.scale), hp(wc.scale, "remoe", "finetune", "train"), hp(wc.scale, "remoe", "hub")
    routers = s.n_layers * s.n_experts * s.d_model
    return R.train_job(
        s,
        tokens=train_tokens(t, h["seq_len"]),
        seq=h["seq_len"],
        batch=t["batch_size"],
        trainable=routers / R.param_count(s),
        micro=max(1, t["batch_size"] // max(1, h["grad_accum"])),
        label="remoe_eor_finetune",
    )


def remoe_eor_trace_job(wc):
    tr, seq = hp(wc.scale, "remoe", "trace"), hp(wc.scale, "remoe", "hub", "seq_len")
    seqs = len(remoe_eor_checkpoints(wc.scale)) * tr["n_docs"]
    return R.infer_job(
        [R.Infer(remoe_eor_spec(wc.scale), seqs=seqs, prompt=seq, batch=tr["batch_size"])], label="remoe_eor_trace"
    )


def remoe_lm_eval_job(wc):
    works = R.lm_eval_works(remoe_model_spec(wc.scale), hp(wc.scale, "remoe", "hub", "lm_eval_tasks"), batch=8)
    return R.infer_job(works * len(remoe_lm_eval_checkpoints(wc.scale)), label="remoe_lm_eval")
