"""The PSE DAG plans the expected jobs at every scale; bad config fails with one line naming the key."""
import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "pse", scale)
    # one server per open model that a spec serves (8 agents and the reference judge at paper scale)
    served = {a["spec"]["serve"] for a in sec["agents"] if "serve" in a["spec"]} | {
        s["serve"] for s in sec["judge"]["specs"] if "serve" in s}
    assert counts == {"pse_scenarios": 1, "pse_run": len(sec["agents"]), "pse_pipeline": 1,
                      "pse_defend": 3, "pse_metrics": 1, "claims": 1, **({"serving_serve": len(served)} if served else {})}
    if scale == "paper":
        assert len(sec["agents"]) == 13  # our paper-scale panel
        assert len(served) == 9 and set(sec["serving"]) == served


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "persist_seeds: 20,", "persist_seedz: 20,")
    assert "pse.scenarios" in msg


def test_bad_step_config_is_one_line(tmp_path):
    spec = {"name": "sim", "spec": {"backend": "sim", "susceptibility": {"factual": 2.0, "preference": 0.9,
            "persona": 0.8, "instruction": 0.85}, "trigger_gain": 0.5, "p_carry": 0.7,
            "hazard": {"factual": 0.3}, "q": 0.25, "catch": 0.6}}
    (tmp_path / "s.jsonl").write_text("")
    out = subprocess.run([sys.executable, "-m", "methods.pse", "run", "--config", json.dumps(spec),
                          "--scenarios", str(tmp_path / "s.jsonl"), "--out", str(tmp_path / "o.jsonl")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "susceptibility" in lines[0] and "factual" in lines[0], out.stderr
