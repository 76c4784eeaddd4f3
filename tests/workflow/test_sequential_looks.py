"""workflow/rules/claims.smk: sequential seeds through Snakemake checkpoints. A toy paper with
planned looks [3, 5, 8] writes one value per seed; the claims checkpoint of each look decides
whether the next look's seeds are asked for. A decided look schedules no more seeds, an
undecided one exactly the next look's, and a finished DAG plans nothing more."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from methods.core import claims as C, stats as S
from methods.core.sequential import look_level

from .conftest import ROOT, snakemake_env

pytestmark = pytest.mark.workflow

LOOKS = [3, 5, 8]
SNAKEFILE = """\
import json

RESULTS = "results"
SCALES = {{"tiny": {{"looks": {{"toy": {looks}}}, "toy": {{"seeds": list(range(8))}}}}}}
VALUES = {values}


def code(entry, step=None):
    return []


include: {claims_smk!r}


# shell steps, not `run:` blocks: Snakemake starts a whole new workflow process for each `run:` job
rule toy_seed:
    output:
        "results/{{scale}}/toy/seeds/{{seed}}.json",
    params:
        value=lambda wc: json.dumps({{"m": VALUES[int(wc.seed)]}}),
    shell:
        "echo {{params.value:q}} > {{output:q}}"


rule toy_summary:
    input:
        lambda wc: [f"results/{{wc.scale}}/toy/seeds/{{s}}.json" for s in range({looks}[int(wc.look)])],
    output:
        "results/{{scale}}/toy/looks/{{look}}/summary.json",
    shell:
        "python summarize.py {{output:q}} {{input:q}}"
"""
SUMMARIZE = """\
import json, sys

values = [json.load(open(p))["m"] for p in sys.argv[2:]]
json.dump({"m": sum(values) / len(values), "replicates": {"m": {"unit": "seed", "values": values}}},
          open(sys.argv[1], "w"))
"""
CLAIMS = {"paper": "toy", "claims": [{
    "id": "H1", "kind": "headline", "statement": "the effect is positive", "paper_value": 1.0, "source": "§1",
    "metric": "m", "statistic": "mean over seeds", "replicates": "seed",
    "checks": {"tiny": {"op": ">", "value": 0.0}}}]}


def workdir(tmp_path: Path, values: list[float]) -> Path:
    (tmp_path / "methods" / "toy").mkdir(parents=True)
    (tmp_path / "methods" / "toy" / "claims.yaml").write_text(yaml.safe_dump(CLAIMS))
    (tmp_path / "summarize.py").write_text(SUMMARIZE)
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(
        looks=LOOKS, values=values, claims_smk=str(ROOT / "workflow" / "rules" / "claims.smk")))
    return tmp_path


def run(wd: Path, *args: str) -> subprocess.CompletedProcess:
    env = snakemake_env()
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args, "results/tiny/toy/claims.json"],
                       cwd=wd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def expected_final_look(values: list[float]) -> int:
    """The schedule computed directly: the first look whose interval excludes 0, else the cap."""
    for k, n in enumerate(LOOKS):
        iv = S.seed_interval(values[:n], look_level(LOOKS, k))
        if iv["lo"] > 0 or iv["hi"] < 0:
            return k
    return len(LOOKS) - 1


@pytest.mark.parametrize("values,final", [
    ([1.0, 1.01, 0.99, 1.0, 1.0, 1.0, 1.0, 1.0], 0),          # decided at the first look
    ([0.2, 1.8, 1.0, 1.1, 0.9, 1.0, 1.05, 0.95], 2),           # undecided at 3 and 5 seeds, decided at 8
    ([0.5, -0.5, 0.1, -0.2, 0.3, -0.1, 0.0, 0.05], 2),         # never decided: stops at the cap
])
def test_seeds_grow_only_while_a_headline_claim_is_undecided(tmp_path, values, final):
    assert expected_final_look(values) == final
    wd = workdir(tmp_path, values)
    run(wd)
    seeds = sorted(int(p.stem) for p in (wd / "results/tiny/toy/seeds").glob("*.json"))
    looks = sorted(int(p.name) for p in (wd / "results/tiny/toy/looks").iterdir())
    assert seeds == list(range(LOOKS[final])) and looks == list(range(final + 1))
    table = json.loads((wd / "results/tiny/toy/claims.json").read_text())
    row = table["claims"][0]
    assert table["look"] == {"index": final, "looks": LOOKS, "seeds": LOOKS[final]}
    assert (row["look"], row["n"]) == (final, LOOKS[final])
    assert table["level"] == pytest.approx(look_level(LOOKS, final))
    # the final claims are the final look's claims, verdict by verdict
    assert table["claims"] == json.loads((wd / f"results/tiny/toy/looks/{final}/claims.json").read_text())["claims"]
    want = C.evaluate_claims(CLAIMS, json.loads((wd / f"results/tiny/toy/looks/{final}/summary.json").read_text()),
                             "tiny", level=look_level(LOOKS, final))["claims"][0]["verdict"]
    assert row["verdict"] == want == ("inconclusive" if final == 2 and values[0] == 0.5 else "reproduced")
    # a finished DAG plans nothing more: no seed, no look
    p = run(wd, "-n")
    assert "Nothing to be done" in p.stdout + p.stderr
