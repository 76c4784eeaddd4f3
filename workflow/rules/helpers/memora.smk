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


def memora_judged(scale):
    """The judged-answer files, one per "store:policy" of the scale's `qa.runs` (none when
    `qa` is null: retrieval metrics only)."""
    qa = hp(scale, "memora").get("qa")
    return [f"{RESULTS}/{scale}/memora/qa/{r.replace(':', '/')}/judged.jsonl" for r in qa["runs"]] if qa else []


# ---- served open models (methods/core/serving/, workflow/rules/serving.smk): `serve: <name>` in memora.llm or a
# qa spec is a client of the DAG's own server of that memora.serving entry. A server's consumers run at once in one
# job group, so each stage gets its own instance (build + theory, retrieve, answer, judge): chained steps never share one.
MEMORA_SERVED_STAGE = {
    "build": "build",
    "theory": "build",
    "retrieve": "retrieve",
    "answer": "answer",
    "judge": "judge",
}


def memora_stage_specs(scale, step):
    """The make_llm specs a step uses: memora.llm (build / theory / retrieve), qa.answer, qa.judge."""
    m = hp(scale, "memora")
    if step in ("answer", "judge"):
        return [(m.get("qa") or {}).get(step)]
    return [m["llm"]] if m["llm"].get("kind") == "prompted" else []


def memora_served(scale, step):
    """The address files of the servers a step talks to ([] for the template LLM or fixed endpoints)."""
    return served_inputs(scale, "memora", memora_stage_specs(scale, step), MEMORA_SERVED_STAGE[step])


def memora_step_cfg(scale, step):
    """The memora section as a step gets it: its `serve:` specs resolved to their stage's address file
    (the section unchanged where nothing is served)."""
    m, inst = hp(scale, "memora"), MEMORA_SERVED_STAGE[step]
    if step in ("answer", "judge"):
        if not (m.get("qa") or {}).get(step, {}) or not m["qa"][step].get("serve"):
            return m
        return {**m, "qa": {**m["qa"], step: served_spec(scale, "memora", m["qa"][step], inst)}}
    if not m["llm"].get("serve"):
        return m
    return {**m, "llm": served_spec(scale, "memora", m["llm"], inst)}
