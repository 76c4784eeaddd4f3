"""The AGoQ DAG plans at every scale (one training job per train variant and seed, one probe, one
aggregate, claims); a bad key in its scale section, or a bad step config, fails in one line
naming the key."""
import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "agoq", scale)
    n_train = len(sec["train_variants"]) * len(sec["seeds"])  # every train variant, every seed
    assert counts == {"agoq_data": 1, "agoq_shards": 1, "agoq_train": n_train,
                      "agoq_probe": 1, "agoq_aggregate": 1, "claims": 1}
    if scale == "tiny":  # the tiny variants, 3 seeds each; fp and qgrad8 always trained
        assert {"fp", "laaq", "uni4", "uni2", "qgrad8"} <= set(sec["train_variants"]) and n_train == 15


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "    world_size: 2\n    hub_id: null", "    world_size: two\n    hub_id: null")
    assert "agoq.run.world_size" in msg


def test_bad_step_config_is_one_line(tmp_path):
    data = {"source": "generated", "text_field": "text", "tokenizer": "char", "train_chars": 400_000,
            "val_chars": 20_000, "arith_fraction": 2, "max_operand": 100, "seed": 0}
    out = subprocess.run([sys.executable, "-m", "methods.agoq", "data", "--config", json.dumps(data),
                          "--out", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "arith_fraction" in out.stderr, out.stderr
