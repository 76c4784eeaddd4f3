"""The TSGD DAG plans at every scale (one train job per variant), and bad config fails with
one line naming the key (Snakemake schema check and the step's own check)."""
import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "tsgd", scale)
    # paper scale: + the lm-eval anchor on the served solver (tsgd.lm_eval.tasks)
    anchor = {"tsgd_lm_eval": 1} if scale == "paper" else {}
    assert counts == {"tsgd_data": 1, "tsgd_baselines": 1, "tsgd_train": len(sec["variants"]),
                      "tsgd_aggregate": 1, "claims": 1, **anchor}
    assert bool(sec.get("lm_eval", {}).get("tasks")) == (scale == "paper")
    assert len(sec["variants"]) == 5      # full, C12, no_budget, local_only, no_verify


def test_paper_jobs_are_http_clients_without_a_gpu(tmp_path):
    """At paper scale every TSGD step talks to the solver/reflector endpoints over HTTP (or is CPU
    work): none reserves a GPU; each gets the scale's CPU resources (workflow/rules/common.smk)."""
    from tests.workflow.test_dag import dry_run_jobs

    target = tmp_path / "r" / "paper" / "tsgd" / "claims.json"
    out = snakemake(str(target), "-n", "-p", config={"scale": "paper", "results_dir": tmp_path / "r"})
    jobs = [j for j in dry_run_jobs(out.stdout) if j["rule"].startswith("tsgd_")]
    assert {j["rule"] for j in jobs} == {"tsgd_data", "tsgd_baselines", "tsgd_train", "tsgd_lm_eval",
                                         "tsgd_aggregate"}
    for j in jobs:
        assert int(j["resources"].get("gpu", 0)) == 0, j
        assert (int(j["resources"]["mem_mb"]), int(j["resources"]["runtime"])) == (64000, 2880), j
        assert "--runtime" not in j["shell"], j   # no torch device to place anything on


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "p_instance: 0.25", "p_instancee: 0.25")
    assert "tsgd.llm.sim_reflector" in msg


def test_cli_bad_config_is_one_line_naming_the_key(tmp_path):
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["tsgd"]
    cfg["tsgd"]["batch_sizee"] = cfg["tsgd"].pop("batch_size")
    (tmp_path / "d").mkdir()
    for split in ("train", "val", "test"):
        (tmp_path / "d" / f"{split}.jsonl").write_text("")
    r = subprocess.run([sys.executable, "-m", "methods.tsgd", "train", "--config", json.dumps(cfg),
                        "--variant", "full", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o.json"),
                        "--trace", str(tmp_path / "t.csv")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "tsgd.tsgd.batch_sizee" in lines[0], r.stderr
