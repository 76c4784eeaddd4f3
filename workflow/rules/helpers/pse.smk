# PSE's helpers (its rules, workflow/rules/pse.smk, include this file first): config
# sections and paths (its steps are CPU jobs: no GPU job sizes). Functions only: Snakemake's
# linter keeps them out of rules files.


def pse_agent_cfg(scale, name):
    """One agent's {name, spec} (spec: the SimAgent's planted parameters or a make_llm spec)."""
    return next(a for a in hp(scale, "pse", "agents") if a["name"] == name)


def pse_primary_cfg(scale):
    return pse_agent_cfg(scale, hp(scale, "pse", "primary"))


def pse_runs(scale):
    return [f"{RESULTS}/{scale}/pse/transcripts/runs/{a['name']}.jsonl" for a in hp(scale, "pse", "agents")]


def pse_defences(scale):
    return [f"{RESULTS}/{scale}/pse/transcripts/def_{d}.jsonl" for d in ("none", "selfverify", "keyword")]


def pse_metrics_cfg(scale):
    """The metrics step's config; `planted` = the primary SimAgent's parameters (null for real models)."""
    spec = pse_primary_cfg(scale)["spec"]
    planted = {k: v for k, v in spec.items() if k != "backend"} if spec.get("backend") == "sim" else None
    return {"analysis": hp(scale, "pse", "analysis"), "judge": hp(scale, "pse", "judge"),
            "primary": hp(scale, "pse", "primary"), "planted": planted}
