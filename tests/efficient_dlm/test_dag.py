"""The Efficient-DLM DAG plans at every scale with one conversion per variant and seed; a bad key in its
scale section or in a step's --config fails with one line naming the key."""
import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper, snakemake_env

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "efficient_dlm", scale)
    assert counts == {"efficient_dlm_data": 1, "efficient_dlm_train_ar": 1,
                      "efficient_dlm_convert": len(sec["variants"]) * len(sec["seeds"]), "efficient_dlm_eval": 1,
                      "efficient_dlm_report": 1, "claims": 1}
    if scale != "smoke":   # all four variants (smoke runs two)
        assert len(sec["variants"]) == 4
    if scale == "tiny":    # three conversion seeds per variant (intervals over seeds)
        assert sec["seeds"] == [0, 1, 2]


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "    clean_intra: causal\n", "    clean_intra: sideways\n")
    assert "efficient_dlm.convert.clean_intra" in msg


def test_bad_step_config_is_one_line():
    bad = json.dumps({"train": {"steps": 0, "batch_size": 2, "lr": 1e-3}, "block": 8})
    out = subprocess.run([sys.executable, "-m", "methods.efficient_dlm", "convert", "--config", bad,
                          "--variant", "blk_clean", "--ar", "x", "--data", "x", "--out", "x"],
                         cwd=ROOT, env=snakemake_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "steps" in lines[0], out.stderr
