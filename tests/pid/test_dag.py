"""The PID DAG plans at every scale with one training job per mixture (+ the omni model) below
paper scale and none at paper scale (the models are the hub's), and a bad key in its scale
section fails before any job, naming the key."""
import pytest

from tests.workflow.conftest import bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "pid", scale)
    n_mix = len(sec["train"]["mixes"])
    train = {} if scale == "paper" else {"pid_train": n_mix + 1}
    assert counts == {"pid_data": 1, **train, "pid_decide": 1, "pid_pid": 1,
                      "pid_reweight": 1, "pid_aggregate": 1, "claims": 1}
    if scale == "paper":
        assert sec["hub"]["vl_models"] and sec["hub"]["benchmarks"] and sec["hub"]["lora_base"]
    if scale == "tiny":   # C2: 12 (mixture × checkpoint) configurations
        assert n_mix * len(sec["train"]["checkpoints"]) == 12


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "  analysis: {profile_config: balanced_final, min_configs: 12}\n",
                         "  analysis: {profile_config: balanced_final, min_config: 12}\n")
    assert "pid.analysis" in msg
