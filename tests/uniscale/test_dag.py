"""Dry runs of the UniScale DAG at every scale, and a bad config failing with one line."""
import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, job_counts, snakemake


@pytest.mark.parametrize("scale,members", [("smoke", 3), ("tiny", 3), ("paper", 6)])
def test_dag_job_counts(tmp_path, scale, members):
    target = tmp_path / scale / "uniscale" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules",
                    config={"results_dir": str(tmp_path), "papers": '["uniscale"]'})
    # paper scale streams the benchmark queries (uniscale_queries); smoke/tiny the pool's generated ones
    queries = {"uniscale_queries": 1} if scale == "paper" else {}
    assert job_counts(out.stdout) == {"model_pool_data": 1, "model_pool_train_member": members,
                                      "model_pool_train_verifier": 1, "model_pool_costs": 1,
                                      "uniscale_build_table": 1, "uniscale_analyze": 1, "claims": 1, **queries}


def test_bad_config_one_line():
    cfg = json.dumps({"alpha": 1.0, "lam": 1.0, "weights": {"cost": [0.1, 0.1, 0.8]}, "policies": ["uis_linucb"],
                      "seeds": [0], "route_tts": "greedy", "tts_model": "M", "knn_k": 10, "feat_dim": 16,
                      "switch_frac": 0.5, "cost_norm": None, "alpha_typo": 2})
    p = subprocess.run([sys.executable, "-m", "methods.uniscale", "analyze", "--config", cfg, "--table", "x",
                        "--data", "x", "--costs", "x", "--runs", "x", "--summary", "x", "--fig_regret", "x",
                        "--fig_pareto", "x"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "alpha_typo" in p.stderr


def test_bad_pool_config_one_line(tmp_path):
    pool = yaml.safe_load((ROOT / "config" / "scales" / "tiny.yaml").read_text())["model_pool"]
    pool["members"][0]["model"] = None      # member S: neither a hub id nor a model to train
    p = subprocess.run([sys.executable, "-m", "methods.core.model_pool", "data", "--config",
                        json.dumps(pool), "--out", str(tmp_path / "never")],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "model_pool.members.S" in p.stderr
