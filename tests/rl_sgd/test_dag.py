"""The rl_sgd DAG plans at every scale with the expected jobs per rule, and bad config fails
with one line naming the key (Snakemake schema and the step CLI)."""
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "rl_sgd", scale)
    # the bases: one per width (tiny) or per hub model (paper)
    n_w, n_s = len(sec.get("widths") or sec["hub"]["models"]), len(sec["seeds"])
    grid = len(sec["grid"]["adamw"]) + len(sec["grid"]["sgd"])
    n_all = min(n_w, 2)  # the narrowest and widest bases run every seed, the others the first
    n_grpo = grid * (n_all * n_s + n_w - n_all) + len(sec["ablation"]) * n_s
    expect = {"rl_sgd_prompts": 1, "rl_sgd_warmstart": n_w, "rl_sgd_grpo": n_grpo, "rl_sgd_sparsity": 1,
              "rl_sgd_sft": 1, "rl_sgd_trl_check": 1, "rl_sgd_aggregate": 1, "claims": 1}
    if scale == "paper":  # the lm-eval tasks on every base and run, one job
        expect["rl_sgd_lm_eval"] = 1
    assert counts == expect
    if scale == "tiny":  # 6 lrs × (3 seeds at d=128 + 3 at d=32) + 3 ablations × 3 seeds
        assert n_grpo == 45


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "         skip_zero_var: true, loss_norm: token,",
                         "         skip_zero_var: true, loss_norm: tokens,")
    assert "rl_sgd.grpo.loss_norm" in msg


def test_cli_bad_config_one_line(tmp_path):
    cmd = [sys.executable, "-m", "methods.rl_sgd", "prompts", "--config", '{"n_evall": 3}', "--out", str(tmp_path)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "prompts.n_evall" in lines[0], p.stderr
