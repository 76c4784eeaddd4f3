"""Start-up validation: cross-field rules of the config dataclasses (`check`, methods/core/config.py)
and YAML syntax errors stop `snakemake -n` before any job, with one line naming the file and
the key (or the line)."""
import pytest

from .conftest import ROOT, bad_scale_edit, copy_scales, snakemake


@pytest.mark.parametrize("edit,key", [
    # siamesenorm's runs: a warm-up longer than their 30 steps, an eval interval past the end
    (("warmup_steps: 5, schedule: cosine, min_lr_ratio: 0.0", "warmup_steps: 31, schedule: cosine, min_lr_ratio: 0.0"),
     "config key 'siamesenorm.run.train.warmup_steps': 31 warm-up steps in a run of steps=30"),
    (("eval_every: 0, ckpt_every: 10", "eval_every: 31, ckpt_every: 10"), "config key 'siamesenorm.run.train.eval_every': 31 is more"),
    # the shared model config (methods/core/models.py): heads must divide the width, kv heads the heads
    (("model: {d_model: 32, n_layers: 2, n_heads: 2,", "model: {d_model: 33, n_layers: 2, n_heads: 2,"),
     "config key 'siamesenorm.run.model.n_heads': 2 heads do not divide d_model=33"),
    (("n_heads: 2, n_kv_heads: null", "n_heads: 2, n_kv_heads: 3"),
     "config key 'siamesenorm.run.model.n_kv_heads': 3 key/value heads do not divide n_heads=2"),
])
def test_cross_field_error_fails_before_any_job(edit, key, tmp_path):
    msg = bad_scale_edit(tmp_path, *edit)    # the one `invalid config in .../smoke.yaml` line
    assert key in msg, msg
    assert not (tmp_path / "r").exists()     # no job ran, no output directory


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    scales = copy_scales(tmp_path / "scales")
    lines = (scales / "smoke.yaml").read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if "steptime: {vocab_size: 64," in line)
    lines[n] = lines[n].replace("vocab_size: 64,", "vocab_size: 64", 1)   # a missing comma
    (scales / "smoke.yaml").write_text("".join(lines))
    out = snakemake("-n", config={"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"},
                    check=False)
    assert out.returncode != 0
    want = f"{scales / 'smoke.yaml'}:{n + 1}: expected ',' or '}}', but got ':'"
    msg = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith(str(scales / "smoke.yaml"))]
    assert len(msg) == 1 and msg[0].startswith(want), out.stderr[-2000:]
    assert not (tmp_path / "r").exists()


def test_scale_files_of_the_repository_pass_the_checks():
    import yaml

    from methods.core import registry
    from methods.core.config import check_scale

    for scale in ("smoke", "tiny", "paper"):
        path = ROOT / "config" / "scales" / f"{scale}.yaml"
        check_scale(yaml.safe_load(path.read_text()), registry.papers(ROOT), str(path), root=ROOT)
