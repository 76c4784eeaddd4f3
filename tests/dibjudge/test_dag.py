"""The DIBJudge DAG plans at every scale with one training job per variant, and a bad key in
its scale section fails before any job, naming the key."""
import pytest

from tests.workflow.conftest import copy_scales, plan_paper, snakemake

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "dibjudge", scale)
    assert counts == {"dibjudge_data": 1, "dibjudge_train": len(sec["variants"]), "dibjudge_report": 1, "claims": 1}
    # the six variants: sft, dib_vib, dib_vq, no_dis, no_proxy, no_bottleneck; smoke runs 3 of them (CI time)
    assert len(sec["variants"]) == (3 if scale == "smoke" else 6)


def test_bad_key_in_section_is_named(tmp_path):
    scales = copy_scales(tmp_path / "scales")
    text = (scales / "smoke.yaml").read_text()
    old = "    lam_dis: 1.0\n"
    i = text.index("# ---- dibjudge")
    assert old in text[i:]
    (scales / "smoke.yaml").write_text(text[:i] + text[i:].replace(old, "    lam_diss: 1.0\n", 1))
    out = snakemake("-n", config={"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"}, check=False)
    assert out.returncode != 0
    msg = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("invalid config")]
    assert len(msg) == 1 and "dibjudge.train" in msg[0] and "smoke.yaml" in msg[0], out.stderr[-2000:]
