# SCOPE's helpers (its rules, workflow/rules/scope.smk, include this file first): config
# sections and paths, and the GPU job size of each torch step, `<rule>_job(wc)` (an R.Job, or None
# where the job needs no GPU; workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps
# them out of rules files.


def scope_member_dirs(scale):
    """The routing pool of SCOPE, in config order: shared pool members (results/{scale}/model_pool)
    and SCOPE's own extra members (results/{scale}/scope/members)."""
    own = {m["name"] for m in hp(scale, "scope", "extra_members")}
    direct = set(hp(scale, "scope", "direct_members"))

    def where(m):
        if m in direct:
            return f"{RESULTS}/{scale}/scope/members_direct/{m}"
        return f"{RESULTS}/{scale}/scope/members/{m}" if m in own else f"{RESULTS}/{scale}/model_pool/members/{m}"

    return [where(m) for m in hp(scale, "scope", "outcomes", "pool", "members")]


def scope_seed_dirs(scale, what):
    """One predictor directory (`rl`, `sft_anchors`, `sft_noanchor`) per replicate seed, in
    `scope.seeds` order."""
    return [f"{RESULTS}/{scale}/scope/predictor/s{s}/{what}" for s in hp(scale, "scope", "seeds")]


def scope_route_cfg(scale):
    """The route section plus the predictor's prompt size (k anchors)."""
    return {"route": hp(scale, "scope", "route"), "k_prompt": hp(scale, "scope", "predictor", "k_prompt")}


# ---- GPU job sizes
def scope_predictor_spec(scale):
    p = hp(scale, "scope", "predictor")
    return own_or_hub(p["hub"], p.get("model"))


def scope_member_job(wc):
    m = next(m for m in hp(wc.scale, "scope", "extra_members") if m["name"] == wc.xm)
    return None if m["hub"] else tiny_train_job(m, "scope_member")  # a hub / API member: a pointer


def scope_outcomes_job(wc):
    """Every pool model's outcome on every query. With hub / API members (paper scale: the
    OpenRouter pool, outcomes from the SCOPE-60K data) nothing runs on a GPU; tiny members
    generate here."""
    q, pool = hp(wc.scale, "scope", "outcomes", "queries"), hp(wc.scale, "scope", "outcomes", "pool")
    own = {m["name"]: m for m in hp(wc.scale, "scope", "extra_members")}
    shared = {m["name"]: m for m in hp(wc.scale, "model_pool", "members")}
    members = [own.get(n) or shared[n] for n in pool["members"]]
    local = [m for m in members if not m["hub"]]
    if not local:
        return None
    n = q["n_anchor"] + q["n_train"] + q["n_test"]
    works = [
        R.Infer(
            R.spec_from_config(m["model"], R.CHAR_VOCAB),
            seqs=n,
            prompt=R.PROMPT_TOKENS,
            gen=pool["max_new_tokens"],
            batch=R.DECODE_BATCH,
        )
        for m in local
    ]
    return R.infer_job(works, label="scope_outcomes")


def scope_sft_job(wc):
    p = hp(wc.scale, "scope", "predictor")
    if p["hub"]:
        return None  # the released predictor: a pointer, nothing trained
    seq = R.SEQ_TOKENS if p["hub"] else p["model"]["max_seq_len"]
    return R.train_job(
        scope_predictor_spec(wc.scale),
        tokens=train_tokens(p["sft"], seq),
        seq=seq,
        batch=p["sft"]["batch_size"],
        label="scope_sft",
    )


def scope_grpo_job(wc):
    """steps x prompts x group rollouts of the predictor (its reasoning, up to the pool's
    max_new_tokens), scored and trained on, with the frozen SFT model as the KL reference."""
    if hp(wc.scale, "scope", "predictor")["hub"]:
        return None  # the released predictor (already SFT + GRPO): a pointer, nothing trained
    g, s = hp(wc.scale, "scope", "predictor", "grpo"), scope_predictor_spec(wc.scale)
    gen = hp(wc.scale, "scope", "outcomes", "pool", "max_new_tokens")
    seqs, seq = g["steps"] * g["prompts"] * g["group"], R.PROMPT_TOKENS + gen
    also = (
        R.Infer(
            s,
            seqs=seqs,
            prompt=R.PROMPT_TOKENS,
            gen=gen,
            batch=min(g["prompts"] * g["group"], R.DECODE_BATCH),
            shared=True,
        ),
        R.Infer(s, seqs=2 * seqs, prompt=seq, batch=1, shared=True),
    )
    return R.train_job(
        s,
        tokens=seqs * seq,
        seq=seq,
        batch=g["prompts"] * g["group"],
        also=also,
        extra_bytes=R.weight_bytes(s) if g["beta"] else 0.0,
        label="scope_grpo",
    )


# the outcome dataset's test questions (the official repository's README: 252 in-distribution test
# questions), for sizing only: the step reads the split as it is
SCOPE_DATASET_TEST_QUESTIONS = 252


def scope_route_job(wc):
    """Predictions of the three predictors (RL, SFT, no-anchor SFT) for every test query and pool
    model; the released predictor (hub) runs twice (k anchors, shared by its SFT and RL pointers,
    and k = 0), generating its reasoning (up to decode.max_new_tokens), plus two scoring passes."""
    outcomes, p = hp(wc.scale, "scope", "outcomes"), hp(wc.scale, "scope", "predictor")
    if p["hub"]:
        d, n_models = p["decode"], len(outcomes["pool"]["members"])
        seqs = SCOPE_DATASET_TEST_QUESTIONS * n_models
        s = scope_predictor_spec(wc.scale)
        gen = R.Infer(s, seqs=seqs, prompt=R.PROMPT_TOKENS * 4, gen=d["max_new_tokens"], batch=d["batch_size"])
        # scoring P(yes)/P(no): 4 sequences at a time (methods/scope/run.py SCORE_BATCH)
        score = R.Infer(s, seqs=2 * seqs, prompt=R.PROMPT_TOKENS * 4 + d["max_new_tokens"], batch=4)
        return R.infer_job([gen, gen, score, score], label="scope_route")
    n = outcomes["queries"]["n_test"] * len(outcomes["pool"]["members"])
    gen = outcomes["pool"]["max_new_tokens"]
    w = R.Infer(scope_predictor_spec(wc.scale), seqs=n, prompt=R.PROMPT_TOKENS, gen=gen, batch=R.DECODE_BATCH)
    return R.infer_job([w] * (3 * len(hp(wc.scale, "scope", "seeds"))), label="scope_route")
