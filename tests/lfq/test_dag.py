"""The LFQ DAG plans at every scale with, per quantization seed, one calibration job and, per
(seed, setting), one quantize job (every baseline), one final-block job (every objective) and
one evaluation; a bad key in its scale section fails before any job, in one line naming the key."""
import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "lfq", scale)
    n_set, n_seed = len(sec["settings"]), len(sec["seeds"])
    assert counts == {
        "lfq_data": 1, "lfq_train_fp": 1, "lfq_calibrate": n_seed, "lfq_quantize": n_seed * n_set,
        "lfq_final": n_seed * n_set, "lfq_lm_eval_tasks": 1, "lfq_evaluate": n_seed * n_set, "lfq_report": 1,
        "claims": 1}
    if scale == "tiny":  # W2g32 and W2g64 × 5 quantization seeds
        assert n_set == 2 and n_seed == 5


def test_bad_key_in_section_is_named(tmp_path):
    assert "lfq.quant" in bad_scale_edit(tmp_path, "  quant: {epochs: 1,", "  quant: {epoch: 1,")


def test_bad_step_config_is_one_line(tmp_path):
    import json
    import subprocess
    import sys

    # the data step's former defaults, written out (the config classes have none), and one bad value
    cfg = {"train_chars": 1_500_000, "val_chars": 60_000, "calib_chars": 60_000, "sum_fraction": 2, "n_digits": 30,
           "n_eval": 100, "seed": 0}
    out = subprocess.run([sys.executable, "-m", "methods.lfq", "data", "--config", json.dumps(cfg),
                          "--out", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "sum_fraction" in out.stderr, out.stderr
