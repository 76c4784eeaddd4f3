"""The ReMoE DAG plans at every scale with one fine-tune per variant, and a bad key in its scale
section fails before any job, naming the key."""
import pytest
import yaml

from tests.workflow.conftest import ROOT, bad_scale_edit, job_counts, snakemake

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
    assert "remoe.finetune" in bad_scale_edit(tmp_path, "    warm_frac: 0.1\n", "    warm_fraction: 0.1\n")
