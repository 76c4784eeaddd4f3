"""The Memora DAG: dry-run job counts per scale; bad configs fail with one line naming the key."""
import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "memora", scale)
    stores = {r.split(":")[0] for r in sec["runs"]}
    want = {"memora_data": 1, "memora_embed": 1, "memora_build": len(stores),
            "memora_retrieve": len(sec["runs"]), "memora_theory": 1, "memora_aggregate": 1, "claims": 1}
    if sec.get("qa"):  # paper scale: one answer and one judge job per answered run
        want.update(memora_answer=len(sec["qa"]["runs"]), memora_judge=len(sec["qa"]["runs"]))
    assert {k: v for k, v in counts.items() if k in want or k.startswith("memora_")} == want
    if scale == "tiny":  # 4 stores; semantic for all, the policy for both Memora variants
        assert (len(stores), len(sec["runs"])) == (4, 6)


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "  policy: {k: 5, expand: 2, budget: 4}\n",
                         "  policy: {k: 5, expand: 2, budgett: 4}\n")
    assert "memora.policy" in msg


def test_cli_bad_config_is_one_line(tmp_path):
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["memora"]
    cfg["build"]["gammma"] = cfg["build"].pop("gamma")
    out = subprocess.run([sys.executable, "-m", "methods.memora", "data", "--config", json.dumps(cfg),
                          "--out", str(tmp_path / "d")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "memora.build.gammma" in lines[0]
