"""The SCOPE DAG plans at every scale (pool members + SCOPE's own members, one outcome table,
two SFT variants, GRPO, routing, claims), and a bad config key fails naming it."""
import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, job_counts, snakemake, snakemake_env

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    import yaml

    sec = yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text())["scope"]
    target = tmp_path / "r" / scale / "scope" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules",
                    config={"scale": scale, "results_dir": tmp_path / "r", "papers": '["scope"]'})
    counts = job_counts(out.stdout)
    own = {m["name"] for m in sec["extra_members"]}
    pool = sec["outcomes"]["pool"]["members"]
    shared = [m for m in pool if m not in own]
    direct = set(sec["direct_members"])
    n_seeds = len(sec["seeds"])
    expect = {"scope_member": len([m for m in pool if m in own and m not in direct]), "scope_outcomes": 1,
              "scope_sft": 2 * n_seeds, "scope_grpo": n_seeds, "scope_route": 1, "claims": 1, "model_pool_data": 1}
    if direct & set(pool):
        expect["scope_direct_member"] = len(direct & set(pool))
    if not expect["scope_member"]:
        del expect["scope_member"]
    if shared:
        expect["model_pool_train_member"] = len(shared)
    assert counts == expect
    if scale == "tiny":      # 6 models, one held out; 250/1200/500 queries
        assert len(pool) == 6 and sec["outcomes"]["pool"]["unseen"] in pool
        q = sec["outcomes"]["queries"]
        assert (q["n_anchor"], q["n_train"], q["n_test"]) == (250, 1200, 500)
        assert n_seeds >= 3 and direct   # >= 3 predictor seeds; a direct-answer member in the pool


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "k_retrieve: 10}", "k_retrieveX: 10}")
    assert "scope" in msg


def test_bad_step_config_is_one_line():
    cfg = json.dumps({"route": {"k_r": 6, "gammaa": 2.0}, "k_prompt": 5})
    out = subprocess.run([sys.executable, "-m", "methods.scope", "route", "--config", cfg, "--outcomes", "x",
                          "--seeds", "0", "--rl", "x", "--sft", "x", "--noanchor", "x", "--out_dir", "x", "--summary", "x",
                          "--figure", "x"], cwd=ROOT, env=snakemake_env(), capture_output=True, text=True)
    assert out.returncode == 2
    lines = [l for l in out.stderr.strip().splitlines() if l]
    assert len(lines) == 1 and "gammaa" in lines[0]
