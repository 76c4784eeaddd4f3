"""A data directory damaged after its step wrote it stops the next step of the DAG.

wd_plasticity at the smoke scale: its data step writes MANIFEST.json last; the directory is
then damaged in the three ways that used to run to exit 0 (a deleted people.jsonl, a
tasks/T2/train.jsonl cut from 200 to 50 rows, a pretrain.txt cut to 10 %), and the step that
reads the damaged file (probes, finetune, shards) must fail with one line naming it, leaving
no output.
"""
import shutil
from pathlib import Path

import pytest

from .conftest import snakemake

pytestmark = pytest.mark.workflow

ADVICE = "the data directory was changed after it was written; rerun its data step"


@pytest.fixture(scope="module")
def wd(tmp_path_factory):
    """The smoke world, tokenizer, shards and one base (what probes and finetune read)."""
    results = tmp_path_factory.mktemp("damaged") / "r"
    cfg = {"scale": "smoke", "results_dir": results}
    root = results / "smoke" / "wd_plasticity"
    snakemake("--cores", "1", str(root / "base" / "wd0.0_s0"), config=cfg, timeout=1200)
    assert (root / "data" / "MANIFEST.json").is_file()
    pristine = root.parent / "data.pristine"
    shutil.copytree(root / "data", pristine, copy_function=shutil.copy2)     # keeps the timestamps
    return cfg, root


def _cut_rows(p: Path, n: int) -> None:
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:n]))


def _failed_job(text: str) -> dict:
    """rule, output paths and log of the one job that failed, from Snakemake's error block."""
    block = text[text.index("Error in rule "):]
    head, _, _ = block.partition("shell:")
    field = {k: v.strip() for k, _, v in (line.strip().partition(": ") for line in head.splitlines()[1:]) if v}
    return {"rule": block.split(":", 1)[0].removeprefix("Error in rule "),
            "output": [Path(x) for x in field.get("output", "").split(", ") if x],
            "log": Path(field["log"].split(" (check")[0])}


# damage, the target, the rule that reads the damaged file there, the expected message after
# "<data>/". Only that rule may run (--allowed-rules; forced where its output exists): a code
# edit since the fixture must not rerun the data step, which would repair the damage.
CASES = {
    "people_deleted": (lambda d: (d / "people.jsonl").unlink(), "probes/wd0.0_s0.json", "wd_plasticity_probes",
                       "people.jsonl: missing (the manifest lists it: 100 rows"),
    "train_cut_at_a_line": (lambda d: _cut_rows(d / "tasks/T2/train.jsonl", 50), "ft/wd0.0_s0/T2",
                            "wd_plasticity_finetune", "tasks/T2/train.jsonl: 50 rows, manifest says 200 (sha256 differs)"),
    "pretrain_cut_to_10pct": (lambda d: (d / "pretrain.txt").write_bytes((d / "pretrain.txt").read_bytes()[:12000]),
                              "shards", "wd_plasticity_shards",
                              "pretrain.txt: 130 lines, manifest says 1306 (sha256 differs)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_data_stops_the_next_step(wd, case):
    cfg, root = wd
    damage, target, rule, want = CASES[case]
    data = root / "data"
    pristine = root.parent / "data.pristine"
    damage(data)
    try:
        out = snakemake("--cores", "1", str(root / target), "--allowed-rules", rule, "--forcerun", rule,
                        config=cfg, check=False, timeout=600)
        text = out.stdout + out.stderr
        assert out.returncode != 0, text[-2000:]
        job = _failed_job(text)
        assert job["rule"] == rule, text[-3000:]
        errors = [line for line in job["log"].read_text().splitlines() if "error" in line.lower()]
        assert len(errors) == 1, job["log"].read_text()[-2000:]
        assert f"{data}/{want}" in errors[0] and errors[0].endswith(ADVICE), errors[0]
        assert job["output"] and not any(p.exists() for p in job["output"])   # no output left behind
    finally:
        shutil.rmtree(data)
        shutil.copytree(pristine, data, copy_function=shutil.copy2)
