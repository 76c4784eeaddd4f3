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
    judge = dict(hp(scale, "pse", "judge"))
    judge["specs"] = [served_spec(scale, "pse", s) for s in judge["specs"]]
    return {
        "analysis": hp(scale, "pse", "analysis"),
        "judge": judge,
        "primary": hp(scale, "pse", "primary"),
        "planted": planted,
    }


# ---- served models (methods/core/serving/): a spec with `serve: <name>` is a client of the DAG's own
# server of that `pse.serving` entry; the step gets `base_url_file`, the rule the address as an input
def pse_step_agent_cfg(scale, name):
    """One agent's {name, spec} as its step gets it (a served spec resolved to its address file)."""
    a = pse_agent_cfg(scale, name)
    return {**a, "spec": served_spec(scale, "pse", a["spec"])}


def pse_served_agent(scale, name):
    """The address file of the server an agent talks to ([] for the simulator or a hosted API)."""
    return served_inputs(scale, "pse", [pse_agent_cfg(scale, name)["spec"]])


def pse_served_judge(scale):
    judge = hp(scale, "pse", "judge")
    return served_inputs(scale, "pse", judge["specs"]) if judge["kind"] == "llm" else []
