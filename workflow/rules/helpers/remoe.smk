# ReMoE's helpers (its rules, workflow/rules/remoe.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def remoe_finetune_cfg(scale, name, seed):
    """The finetune section plus the variant (loss switches) named `name` and the seed."""
    found = [v for v in hp(scale, "remoe", "variants") if v["name"] == name]
    if not found:
        raise WorkflowError(f"remoe: no variant named {name!r} in remoe.variants")
    return {**hp(scale, "remoe", "finetune"), "variant": found[0], "seed": int(seed)}


def remoe_checkpoints(scale):
    """The pre-trained checkpoint and one gate-only fine-tune per variant and seed."""
    names = [v["name"] for v in hp(scale, "remoe", "variants")]
    if "base" in names or len(set(names)) != len(names):
        raise WorkflowError("remoe.variants: names must be unique and not 'base'")
    return [f"{RESULTS}/{scale}/remoe/ckpt/base.pt"] + [
        f"{RESULTS}/{scale}/remoe/ckpt/finetuned/{n}_s{seed}.pt" for n in names for seed in hp(scale, "remoe", "seeds")]


# ---- GPU job sizes
def remoe_model_spec(scale):
    p = hp(scale, "remoe", "pretrain")
    if p["hub_id"]:
        return hub_spec(p["hub_id"])
    m = p["moe"]
    return R.spec_from_config(p["model"], R.CHAR_VOCAB, n_experts=m["n_experts"], k=m["k"],
                              expert_d_ff=m["expert_d_ff"], n_shared=m["n_shared"])


def remoe_pretrain_job(wc):
    p = hp(wc.scale, "remoe", "pretrain")
    if p["hub_id"]:  # paper scale: the hub checkpoint is loaded, not pre-trained
        return R.load_job(remoe_model_spec(wc.scale), label="remoe_pretrain")
    return R.train_job(remoe_model_spec(wc.scale), tokens=train_tokens(p["train"], p["model"]["max_seq_len"]),
                       seq=p["model"]["max_seq_len"], batch=p["train"]["batch_size"], label="remoe_pretrain")


def remoe_finetune_job(wc):
    """Gate-only: the routers train (AdamW), everything else is frozen; micro-batch
    batch / grad_accum sequences of hub.seq_len."""
    s, t, h = remoe_model_spec(wc.scale), hp(wc.scale, "remoe", "finetune", "train"), hp(wc.scale, "remoe", "hub")
    routers = s.n_layers * s.n_experts * s.d_model
    return R.train_job(s, tokens=train_tokens(t, h["seq_len"]), seq=h["seq_len"], batch=t["batch_size"],
                       trainable=routers / R.param_count(s), micro=max(1, t["batch_size"] // max(1, h["grad_accum"])),
                       label="remoe_finetune")


def remoe_trace_job(wc):
    tr, seq = hp(wc.scale, "remoe", "trace"), hp(wc.scale, "remoe", "hub", "seq_len")
    seqs = len(remoe_checkpoints(wc.scale)) * tr["n_docs"]
    return R.infer_job([R.Infer(remoe_model_spec(wc.scale), seqs=seqs, prompt=seq, batch=tr["batch_size"])],
                       label="remoe_trace")
