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
    tiny_lm = {"verbalized_sampling_pretrain": 1, "verbalized_sampling_dpo": 1}
    # paper scale: the base and the aligned generator, each served by the DAG and sampled over HTTP,
    # so the tiny LM is not trained there
    served = {"serving_serve": 2}
    assert job_counts(out.stdout) == {"verbalized_sampling_synth": 1, "verbalized_sampling_theory": 1,
                                      "verbalized_sampling_sample": 2, "verbalized_sampling_analyze": 1,
                                      "claims": 1, **(served if scale == "paper" else tiny_lm)}


def test_bad_key_in_section_is_named(tmp_path):
    msg = bad_scale_edit(tmp_path, "sim_repeats: 2,", "sim_repeat: 2,")
    assert "verbalized_sampling" in msg and "sim_repeat" in msg


def test_base_and_aligned_must_be_different_served_models(tmp_path):
    """The study compares a base with its aligned model: both generators on one served entry (or two
    entries of one model) is refused in one line."""
    old = "aligned: {backend: openai, serve: aligned,"
    msg = bad_scale_edit_paper(tmp_path, old, "aligned: {backend: openai, serve: base,")
    assert "must be different served models" in msg
    msg = bad_scale_edit_paper(tmp_path, "aligned: {model: Qwen/Qwen2.5-7B-Instruct,", "aligned: {model: Qwen/Qwen2.5-7B,")
    assert "must be different served models" in msg
    msg = bad_scale_edit_paper(tmp_path, old, "aligned: {backend: openai, serve: chat,")
    assert "'chat' is not an entry of 'verbalized_sampling.serving'" in msg


def bad_scale_edit_paper(tmp_path, old: str, new: str) -> str:
    from tests.workflow.conftest import config_error, copy_scales

    scales = copy_scales(tmp_path / "scales")
    text = (scales / "paper.yaml").read_text()
    assert old in text, old
    (scales / "paper.yaml").write_text(text.replace(old, new, 1))
    out = snakemake("-n", config={"scale": "paper", "scales_dir": scales, "results_dir": tmp_path / "r"}, check=False)
    msg = config_error(out)
    assert "paper.yaml" in msg
    return msg
