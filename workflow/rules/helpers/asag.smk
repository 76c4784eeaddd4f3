# ASAG's helpers (its rules, workflow/rules/asag.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def asag_runs(scale):
    return [f"{RESULTS}/{scale}/asag/runs/{p['name']}.jsonl" for p in hp(scale, "asag", "decode", "policies")]


# ---- GPU job sizes
def asag_decode_job(wc):
    """Greedy decoding of every test problem up to the token budget, one at a time (the policy's
    signals are read at every step)."""
    d, hub = hp(wc.scale, "asag", "decode"), hp(wc.scale, "asag", "train", "hub_id")
    if not hub:
        spec = R.spec_from_config(hp(wc.scale, "asag", "train", "model"), R.CHAR_VOCAB)
    else:
        spec = hub_spec(hub)
    n = d["n_problems"] or hp(wc.scale, "asag", "data", "n_test")
    return R.infer_job([R.Infer(spec, seqs=n, prompt=R.PROMPT_TOKENS, gen=d["budget"], batch=1)], label="asag_decode")


def asag_train_job(wc):
    """Paper scale: records the hub LRM (nothing trained, no GPU); else the tiny model."""
    tr = hp(wc.scale, "asag", "train")
    if tr["hub_id"]:
        return None
    return R.train_job(R.spec_from_config(tr["model"], R.CHAR_VOCAB), tokens=train_tokens(tr["train"], tr["seq_len"]),
                       seq=tr["seq_len"], batch=tr["train"]["batch_size"], label="asag_train")
