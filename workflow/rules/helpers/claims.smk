# Helpers of workflow/rules/claims.smk: the planned looks of a sequential paper and the look
# at which its claims are final (methods/core/sequential.py).
from methods.core.results import read_json as _read_json
from methods.core.sequential import next_look as _next_look
from methods.core.sequential import seeds_at as _seeds_at


def looks_of(scale, paper):
    """The paper's planned looks at this scale, or None when it is not sequential there."""
    return (SCALES[scale].get("looks") or {}).get(paper)


def final_look(scale, paper):
    """The look at which a sequential paper's claims are final: the first whose claims leave
    no headline claim that more seeds could decide, or the cap. Each look's claims are a
    checkpoint, so Snakemake asks for the next look's seeds only once this one is known."""
    looks, k = looks_of(scale, paper), 0
    while True:
        out = checkpoints.claims_look.get(scale=scale, paper=paper, look=k).output[0]
        nxt = _next_look(_read_json(out)["claims"], looks, k)
        if nxt is None:
            return k
        k = nxt


def claims_metrics(wc):
    """The summary the final claims are evaluated on."""
    return f"{final_dir(wc.scale, wc.paper)}/summary.json"


def look_args(scale, paper, look):
    looks = looks_of(scale, paper)
    return "" if looks is None else f"--looks {','.join(map(str, looks))} --look {int(look)}"


def look_seeds(scale, paper, look):
    """The seeds of look `look` (0-based) of a sequential paper: the first looks[look] of its
    `seeds` list."""
    return _seeds_at(hp(scale, paper, "seeds"), looks_of(scale, paper), int(look))


def final_dir(scale, paper):
    """Where a paper's summary, table and figures are: its results directory, or for a paper
    that is sequential at this scale, its final look's (an input function: it reads checkpoints)."""
    top = f"{RESULTS}/{scale}/{paper}"
    return top if looks_of(scale, paper) is None else f"{top}/looks/{final_look(scale, paper)}"
