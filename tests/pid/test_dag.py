"""The PID DAG plans at every scale with one training job per mixture (+ the omni model), and a
bad key in its scale section fails before any job, naming the key."""
import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, job_counts, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec = yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text())["pid"]
    target = tmp_path / "r" / scale / "pid" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules",
                    config={"scale": scale, "results_dir": tmp_path / "r", "papers": '["pid"]'})
    counts = job_counts(out.stdout)
    n_mix = len(sec["train"]["mixes"])
    assert counts == {"pid_data": 1, "pid_train": n_mix + 1, "pid_decide": 1, "pid_pid": 1,
                      "pid_reweight": 1, "pid_aggregate": 1, "claims": 1}
    if scale == "tiny":   # card §5 C2: 12 (mixture × checkpoint) configurations
        assert n_mix * len(sec["train"]["checkpoints"]) == 12


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "  analysis: {profile_config: balanced_final, min_configs: 12}\n",
                         "  analysis: {profile_config: balanced_final, min_config: 12}\n")
    assert "pid.analysis" in msg
