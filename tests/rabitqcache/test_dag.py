"""The RaBitQCache DAG plans at every scale (one model and one sparse evaluation per training
seed, lm-eval only where tasks are configured); a bad key in its scale section, or several seeds
of one hub model, fails before any job, in one line naming the key; a bad step config is a
one-line error."""
import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "rabitqcache", scale)
    looks = (yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text()).get("looks") or {}).get(
        "rabitqcache")
    # one trained model and one sparse evaluation per seed; with sequential seeds, a dry run plans
    # the first look's seeds, its report and its claims (the checkpoint), then the final claims
    n = looks[0] if looks else len(sec["seeds"])
    want = {"rabitqcache_data": 1, "rabitqcache_train": n, "rabitqcache_capture": 1, "rabitqcache_estimator": 1,
            "rabitqcache_sparse": n, "claims": 1,
            **({"rabitqcache_look_report": 1, "claims_look": 1} if looks else {"rabitqcache_report": 1})}
    if sec["lm_eval"]["tasks"]:
        want["rabitqcache_lm_eval"] = 1
    assert counts == want
    assert bool(sec["lm_eval"]["tasks"]) == (scale == "paper")   # LongBench / RULER at paper scale only
    assert (len(sec["seeds"]) == 1) == (scale == "paper")         # the hub model is one model
    assert bool(looks) == (scale != "paper") and (not looks or looks[-1] == len(sec["seeds"]))


def test_bad_key_in_section_is_named(tmp_path):
    assert "rabitqcache.estimator" in bad_scale_edit(tmp_path, "  estimator: {rotations: 20,", "  estimator: {rotation: 20,")


def test_a_hub_model_with_several_seeds_is_refused(tmp_path):
    msg = bad_scale_edit(tmp_path, "    hub_id: null\n  method: {method: rabitq,",
                         "    hub_id: org/model\n  method: {method: rabitq,")
    assert "'seeds'" in msg and "hub_id" in msg, msg


def test_bad_step_config_is_one_line(tmp_path):
    method = {"method": "rabitq", "top_p": 0.85, "budget": 0.1, "query_bits": 4, "center": True, "quantize_interval": 16,
              "skip_layers": 2, "quest_page": 8, "rotation_seed": 0, "fp16_bytes": 2, "prefill_impl": "eager"}
    cfg = {"n_prompts": 8, "batch_size": 8, "top_ps": [0.5], "ref_p": 0.85, "tail_steps": 8, "method": method}
    out = subprocess.run([sys.executable, "-m", "methods.rabitqcache", "sparse", "--config", json.dumps(cfg),
                          "--model", str(tmp_path), "--data", str(tmp_path), "--out", str(tmp_path / "s.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "'sparse.ref_p'" in out.stderr, out.stderr
