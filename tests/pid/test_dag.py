"""The PID DAG plans at every scale with one training job per (mixture, training seed) plus the
omni model, and one decide and one PID job per training seed, below paper scale, and no training
job at paper scale (the models are the hub's); a bad key in its scale section fails before any
job, naming the key."""
import pytest

from tests.workflow.conftest import bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "pid", scale)
    n_mix = len(sec["train"]["mixes"])
    # one training job per (mixture, training seed) plus the omni model; decisions and PID per seed
    n_seeds = 1 if scale == "paper" else len(sec["train"]["seeds"])
    train = {} if scale == "paper" else {"pid_train": n_mix * n_seeds + 1}
    assert counts == {"pid_data": 1, **train, "pid_decide": n_seeds, "pid_pid": n_seeds,
                      "pid_reweight": 1, "pid_aggregate": 1, "claims": 1}
    if scale == "paper":
        assert sec["hub"]["vl_models"] and sec["hub"]["benchmarks"] and sec["hub"]["lora_base"]
    if scale == "tiny":   # C2: 12 (mixture × checkpoint) configurations per seed, >= 3 training seeds
        assert n_mix * len(sec["train"]["checkpoints"]) == 12 and n_seeds >= 3


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "  analysis: {profile_config: balanced_final, min_configs: 12}\n",
                         "  analysis: {profile_config: balanced_final, min_config: 12}\n")
    assert "pid.analysis" in msg
