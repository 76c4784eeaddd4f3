# Memora's helpers (its rules, workflow/rules/memora.smk, include this file first): config
# sections and paths (its steps are CPU jobs: no GPU job sizes). Functions only: Snakemake's
# linter keeps them out of rules files.


def memora_runs(scale):
    """The retrieval-run files, one per "store:policy" of the scale's `runs`."""
    return [f"{RESULTS}/{scale}/memora/ret/{r.replace(':', '/')}.jsonl" for r in hp(scale, "memora", "runs")]


def memora_builds(scale):
    """The store files the runs need (each built once)."""
    stores = sorted({r.split(":")[0] for r in hp(scale, "memora", "runs")})
    return [f"{RESULTS}/{scale}/memora/stores/{s}.json" for s in stores]
