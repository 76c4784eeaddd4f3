# TSGD's helpers (its rules, workflow/rules/tsgd.smk, include this file first): config
# sections and paths (its steps are CPU jobs: no GPU job sizes). Functions only: Snakemake's
# linter keeps them out of rules files.


def tsgd_outputs(scale, kind, ext):
    """One file per TSGD variant (libs/*.json or traces/*.csv), in the config's order."""
    return [f"{RESULTS}/{scale}/tsgd/{kind}/{v}.{ext}" for v in hp(scale, "tsgd")["variants"]]


def tsgd_lm_eval_output(scale):
    """The lm-eval anchor's output where the scale names lm-eval tasks (paper), else none."""
    tasks = (hp(scale, "tsgd").get("lm_eval") or {}).get("tasks")
    return [f"{RESULTS}/{scale}/tsgd/lm_eval.json"] if tasks else []
