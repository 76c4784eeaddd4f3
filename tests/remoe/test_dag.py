"""The ReMoE DAG plans at every scale with one fine-tune per variant, and a bad key in its scale
section fails before any job, naming the key."""
import pytest
import yaml

from tests.workflow.conftest import ROOT, copy_scales, job_counts, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec = yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text())["remoe"]
    target = tmp_path / "r" / scale / "remoe" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules", config={"scale": scale, "results_dir": tmp_path / "r"})
    counts = job_counts(out.stdout)
    assert counts == {"remoe_data": 1, "remoe_pretrain": 1, "remoe_finetune": len(sec["variants"]),
                      "remoe_trace": 1, "remoe_analyze": 1, "claims": 1}
    names = [v["name"] for v in sec["variants"]]
    assert names == (["remoe", "ce_only"] if scale == "smoke" else ["remoe", "ce_only", "no_trust"])


def test_bad_key_in_section_is_named(tmp_path):
    scales = copy_scales(tmp_path / "scales")
    text = (scales / "smoke.yaml").read_text()
    old = "    warm_frac: 0.1\n"
    assert text.count(old) == 1
    (scales / "smoke.yaml").write_text(text.replace(old, "    warm_fraction: 0.1\n", 1))
    out = snakemake("-n", config={"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"}, check=False)
    assert out.returncode != 0
    msg = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("invalid config")]
    assert len(msg) == 1 and "remoe.finetune" in msg[0] and "smoke.yaml" in msg[0], out.stderr[-2000:]
