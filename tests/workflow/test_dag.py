"""The DAG plans at every scale, lints clean, and rejects bad config before any job runs."""
import re

import pytest
import yaml

from .conftest import ROOT, bad_scale_edit, config_error, job_counts, snakemake


@pytest.mark.parametrize("scale,n_pretrain", [("smoke", 4), ("tiny", 12), ("paper", 6)])
def test_dry_run_every_scale(scale, n_pretrain, tmp_path):
    out = snakemake("-n", "--quiet", "rules", config={"scale": scale, "results_dir": tmp_path / "r",
                                                       "reports_dir": tmp_path / "p"})
    counts = job_counts(out.stdout)
    # λ grid × seeds bases; one fine-tune per base × task × LR; one claims + report per scale
    assert counts["wdp_pretrain"] == n_pretrain
    assert counts["wdp_probes"] == counts["wdp_evaluate"] == n_pretrain
    assert counts["wdp_finetune"] == n_pretrain * 2  # one per base × task (the LR grid runs inside)
    papers = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["papers"]
    assert counts["claims"] == len(papers)  # one claims table per enabled paper
    assert counts["report"] == counts["all"] == 1


def test_lint_is_clean():
    out = snakemake("--lint")
    assert "Congratulations, your workflow is in a good condition" in out.stdout + out.stderr


@pytest.mark.parametrize("override,key", [
    ({"scale": "huge"}, "'scale'"),
    ({"papers": "[nosuchpaper]"}, "'papers.0'"),
    ({"colour": "red"}, "'colour' was unexpected"),
])
def test_bad_run_config_fails_before_any_job(override, key, tmp_path):
    out = snakemake("-n", config={"results_dir": tmp_path, **override}, check=False)
    assert key in config_error(out)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("edit,key", [
    (("steps: 60,", "steps: many,"), "'wd_plasticity.pretrain.train.steps': 'many' is not of type 'integer'"),
    (("eval_batches: 2", "eval_batchez: 2"), "'eval_batchez' was unexpected"),
    (("lrs: [1.0e-3, 3.0e-3]", "lrs: []"), "'wd_plasticity.finetune.lrs'"),
    (("steps: 60, batch_size: 16, lr: 3.0e-3, optimizer: adamw", "steps: 60, batch_size: 16, lr: 3.0e-3, optimizer: lion"),
     "'wd_plasticity.pretrain.train.optimizer'"),
])
def test_bad_scale_file_names_the_key(edit, key, tmp_path):
    assert key in bad_scale_edit(tmp_path, *edit)


def test_scale_files_share_their_keys():
    """Presets differ only in numbers (CONVENTIONS 2): the same key tree at every scale."""
    import yaml

    from .conftest import ROOT

    def keys(node, prefix=""):
        if isinstance(node, dict):
            out = set()
            for k, v in node.items():
                # task names are data (generated T1/T2 vs hub datasets), their fields are keys
                p = f"{prefix}.{k}" if not prefix.endswith(".tasks") else f"{prefix}.*"
                out |= {p} | keys(v, p)
            return out
        return set()

    trees = {s: keys(yaml.safe_load((ROOT / "config" / "scales" / f"{s}.yaml").read_text()))
             for s in ("smoke", "tiny", "paper")}
    assert trees["smoke"] == trees["tiny"] == trees["paper"]


def test_envs_match_pins():
    """envs/*.yaml carry exactly pyproject's pins (regenerate with `make envs`)."""
    import tomllib

    from .conftest import ROOT

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for env in ("cpu", "cuda"):
        pinned = re.findall(r'^    - "(.+)"$', (ROOT / "envs" / f"{env}.yaml").read_text(), re.M)
        assert pinned == deps, env
