"""The ReMoE DAG plans at every scale with one fine-tune per variant and seed, and a bad key in its scale
section fails before any job, naming the key."""
import pytest

from tests.workflow.conftest import bad_scale_edit, plan_paper

pytestmark = pytest.mark.workflow


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "remoe", scale)
    n_ft = len(sec["variants"]) * len(sec["seeds"])
    if scale == "paper":  # the hub conversations; the second MoE's ReMoE fine-tunes and traces; lm-eval
        assert counts == {"remoe_hub_data": 1, "remoe_pretrain": 1, "remoe_finetune": n_ft, "remoe_trace": 1,
                          "remoe_eor_pretrain": 1, "remoe_eor_finetune": len(sec["seeds"]), "remoe_eor_trace": 1,
                          "remoe_lm_eval": 1, "remoe_analyze": 1, "claims": 1}
    else:
        assert counts == {"remoe_data": 1, "remoe_pretrain": 1, "remoe_finetune": n_ft,
                          "remoe_trace": 1, "remoe_analyze": 1, "claims": 1}
    names = [v["name"] for v in sec["variants"]]
    assert names == (["remoe", "ce_only"] if scale == "smoke" else ["remoe", "ce_only", "no_trust"])
    assert len(sec["seeds"]) == (3 if scale == "tiny" else 1)


def test_bad_key_in_section_is_named(tmp_path):
    assert "remoe.finetune" in bad_scale_edit(tmp_path, "    warm_frac: 0.1\n", "    warm_fraction: 0.1\n")
