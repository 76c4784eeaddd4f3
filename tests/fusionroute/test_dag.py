"""The FusionRoute DAG plans at every scale (per replicate: 3 experts, one router SFT, one CDPO, one
eval; one aggregate), and
a bad key in its scale section fails before any job, naming the key."""
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale,seeds", [("smoke", 1), ("tiny", 3), ("paper", 1)])
def test_dry_run_job_counts(scale, seeds, tmp_path):
    """One pipeline per replicate (fusionroute.seeds), one aggregate over them."""
    _, counts = plan_paper(tmp_path, "fusionroute", scale)
    assert counts == {"fusionroute_gen_data": seeds, "fusionroute_train_expert": 3 * seeds,
                      "fusionroute_sft_router": seeds, "fusionroute_cdpo": seeds, "fusionroute_eval": seeds,
                      "fusionroute_aggregate": 1, "claims": 1}


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "    lambda_route: 1.0\n", "    lambda_rout: 1.0\n")
    assert "fusionroute.router" in msg


def test_cli_bad_config_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "methods.fusionroute", "data", "--config",
                          '{"n_trian": 3}', "--out", str(tmp_path / "never")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "n_trian" in lines[0], out.stderr
