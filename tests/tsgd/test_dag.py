"""The TSGD DAG plans at every scale (one train job per variant), and bad config fails with
one line naming the key (Snakemake schema check and the step's own check)."""
import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "tsgd", scale)
    assert counts == {"tsgd_data": 1, "tsgd_baselines": 1, "tsgd_train": len(sec["variants"]),
                      "tsgd_aggregate": 1, "claims": 1}
    assert len(sec["variants"]) == 5      # full, C12, no_budget, local_only, no_verify


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "p_instance: 0.25", "p_instancee: 0.25")
    assert "tsgd.llm.sim_reflector" in msg


def test_cli_bad_config_is_one_line_naming_the_key(tmp_path):
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["tsgd"]
    cfg["tsgd"]["batch_sizee"] = cfg["tsgd"].pop("batch_size")
    (tmp_path / "d").mkdir()
    for split in ("train", "val", "test"):
        (tmp_path / "d" / f"{split}.jsonl").write_text("")
    r = subprocess.run([sys.executable, "-m", "methods.tsgd", "train", "--config", json.dumps(cfg),
                        "--variant", "full", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o.json"),
                        "--trace", str(tmp_path / "t.csv")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "tsgd.tsgd.batch_sizee" in lines[0], r.stderr
