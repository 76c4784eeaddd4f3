# ASAG's helpers (its rules, workflow/rules/asag.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def asag_runs(scale):
    return [f"{RESULTS}/{scale}/asag/runs/{p['name']}.jsonl" for p in hp(scale, "asag", "decode", "policies")]


# ---- GPU job sizes
# test problems of the paper-scale benchmarks (GSM8K test, MATH-500, AMC 2023, AIME 2024 and 2025,
# OlympiadBench OE_TO_maths_en_COMP, GPQA Diamond), for sizing only
ASAG_BENCH_ROWS = {
    "gsm8k": 1319,
    "math500": 500,
    "amc23": 40,
    "aime_2024": 30,
    "aime2025": 30,
    "olympiadbench": 675,
    "gpqa": 198,
}


def asag_decode_job(wc):
    """Greedy decoding of every test problem up to the token budget, one at a time (the policy's
    signals are read at every step); paper scale: every model of `paper.models` in turn."""
    d, hub = hp(wc.scale, "asag", "decode"), hp(wc.scale, "asag", "train", "hub_id")
    if not hub:
        spec = R.spec_from_config(hp(wc.scale, "asag", "train", "model"), R.CHAR_VOCAB)
        n = d["n_problems"] or hp(wc.scale, "asag", "data", "n_test")
    else:
        spec = hub_spec(hub)
        paper = hp(wc.scale, "asag", "paper")
        per = [
            min(d["n_problems"] or 10**9, ASAG_BENCH_ROWS.get(Path(b).name.lower(), 500)) for b in paper["benchmarks"]
        ]
        n = sum(per) * max(1, len(paper["models"]))
    return R.infer_job([R.Infer(spec, seqs=n, prompt=R.PROMPT_TOKENS, gen=d["budget"], batch=1)], label="asag_decode")


def asag_train_job(wc):
    """Paper scale: records the hub LRM (nothing trained, no GPU); else the tiny model."""
    tr = hp(wc.scale, "asag", "train")
    if tr["hub_id"]:
        return None
    return R.train_job(
        R.spec_from_config(tr["model"], R.CHAR_VOCAB),
        tokens=train_tokens(tr["train"], tr["seq_len"]),
        seq=tr["seq_len"],
        batch=tr["train"]["batch_size"],
        label="asag_train",
    )
