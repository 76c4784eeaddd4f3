# The shared model pool's helpers (its rules, workflow/rules/model_pool.smk, include this file
# first; UniScale and SCOPE use them too): its members' paths and configs, and the GPU job size
# of each torch step, `<rule>_job(wc)` (an R.Job, or None where the job needs no GPU;
# workflow/rules/sizes.smk). Functions only: Snakemake's linter keeps them out of rules files.


def model_pool_members(scale):
    """Every policy member directory of the shared model pool."""
    return [f"{RESULTS}/{scale}/model_pool/members/{m['name']}" for m in hp(scale, "model_pool", "members")]


def model_pool_member(scale, name):
    """The config of the policy member called `name`."""
    return next(m for m in hp(scale, "model_pool", "members") if m["name"] == name)


def model_pool_specs(scale):
    """The policy members' and the verifier's specs (hub models; own shapes where trained here)."""
    p = hp(scale, "model_pool")
    mk = lambda m: hub_spec(m["hub"]) if m["hub"] else R.spec_from_config(m["model"], R.CHAR_VOCAB)
    return [mk(m) for m in p["members"]], mk(p["verifier"])


# ---- GPU job sizes
def model_pool_train_member_job(wc):
    m = model_pool_member(wc.scale, wc.member)
    return None if m["hub"] else tiny_train_job(m, "model_pool_train_member")  # a hub member: a pointer


def model_pool_train_verifier_job(wc):
    v = hp(wc.scale, "model_pool", "verifier")
    return None if v["hub"] else tiny_train_job(v, "model_pool_train_verifier")


def model_pool_costs_job(wc):
    """Every member and the verifier loaded in turn; forwards of batch x ctx_len, repeated."""
    c = hp(wc.scale, "model_pool", "cost")
    members, verifier = model_pool_specs(wc.scale)
    works = [
        R.Infer(s, seqs=c["batch"] * c["repeats"], prompt=c["ctx_len"], gen=1, batch=c["batch"])
        for s in members + [verifier]
    ]
    return R.infer_job(works, label="model_pool_costs")
