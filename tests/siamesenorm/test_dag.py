"""The SiameseNorm DAG plans at every scale with one run per scheme × lr × seed, and a bad
key in its scale section fails before any job, naming the key."""
import pytest

from tests.workflow.conftest import bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "siamesenorm", scale)
    n_runs = len(sec["schemes"]) * len(sec["lrs"]) * len(sec["seeds"])
    assert counts == {"siamesenorm_data": 1, "siamesenorm_shards": 1, "siamesenorm_train": n_runs,
                      "siamesenorm_steptime": 1, "siamesenorm_evaluate": 1, "siamesenorm_aggregate": 1,
                      "claims": 1}
    if scale == "tiny":  # 3 schemes × 2 lrs × 3 seeds
        assert n_runs == 18


def test_bad_key_in_section_is_named(tmp_path):
    assert "siamesenorm.run" in bad_scale_edit(tmp_path, "    grad_stats_step: 10\n", "    grad_stats_stepp: 10\n")
