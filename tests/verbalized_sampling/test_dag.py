"""Dry-run of the paper's DAG at every scale, and a bad scale-file key named in one line."""
from __future__ import annotations

import pytest

from tests.workflow.conftest import bad_scale_edit, job_counts, snakemake

pytestmark = pytest.mark.workflow

PAPERS = '["verbalized_sampling"]'


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    target = tmp_path / "r" / scale / "verbalized_sampling" / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules",
                    config={"scale": scale, "results_dir": tmp_path / "r", "papers": PAPERS})
    assert job_counts(out.stdout) == {"verbalized_sampling_synth": 1, "verbalized_sampling_theory": 1,
                                      "verbalized_sampling_pretrain": 1, "verbalized_sampling_dpo": 1,
                                      "verbalized_sampling_sample": 2, "verbalized_sampling_analyze": 1,
                                      "claims": 1}


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "sim_repeats: 2,", "sim_repeat: 2,")
    assert "verbalized_sampling" in msg and "sim_repeat" in msg
