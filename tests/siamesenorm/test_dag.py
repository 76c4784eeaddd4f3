"""The SiameseNorm DAG plans at every scale with one run per scheme × lr × seed, and a bad
key in its scale section fails before any job, naming the key."""
import pytest
import yaml

from tests.workflow.conftest import ROOT, copy_scales, job_counts, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec = yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text())["siamesenorm"]
    target = tmp_path / "r" / scale / "siamesenorm" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules", config={"scale": scale, "results_dir": tmp_path / "r"})
    counts = job_counts(out.stdout)
    n_runs = len(sec["schemes"]) * len(sec["lrs"]) * len(sec["seeds"])
    assert counts == {"sn_data": 1, "sn_train": n_runs, "sn_steptime": 1, "sn_evaluate": 1,
                      "sn_aggregate": 1, "claims": 1}
    if scale == "tiny":  # card §5: 3 schemes × 2 lrs × 2 seeds
        assert n_runs == 12


def test_bad_key_in_section_is_named(tmp_path):
    scales = copy_scales(tmp_path / "scales")
    text = (scales / "smoke.yaml").read_text()
    old = "    grad_stats_step: 10\n"
    assert old in text
    (scales / "smoke.yaml").write_text(text.replace(old, "    grad_stats_stepp: 10\n", 1))
    out = snakemake("-n", config={"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"}, check=False)
    assert out.returncode != 0
    msg = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("invalid config")]
    assert len(msg) == 1 and "siamesenorm.run" in msg[0] and "smoke.yaml" in msg[0], out.stderr[-2000:]
