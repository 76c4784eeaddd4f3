"""Bad configs fail with one line naming the key."""
import json

from methods.core import cli
from methods.pid.__main__ import build_parser


def test_unknown_key_is_named(tmp_path, capsys):
    cfg = {"n_train": 10, "n_profile": 10, "n_test": 10, "n_av_train": 10, "n_av_test": 10,
           "vision_only_frac": 0.9, "seed": 0, "hub": {}, "n_trian": 3}
    rc = cli.main(build_parser(), ["data", "--config", json.dumps(cfg), "--out", str(tmp_path / "d.npz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "data.n_trian" in err[0]


def test_paper_scale_hub_needs_benchmarks(tmp_path, capsys):
    cfg = {"n_train": 10, "n_profile": 10, "n_test": 10, "n_av_train": 10, "n_av_test": 10,
           "vision_only_frac": 0.9, "seed": 0, "hub": {"vl_models": ["Qwen/Qwen2.5-VL-7B-Instruct"]}}
    rc = cli.main(build_parser(), ["data", "--config", json.dumps(cfg), "--out", str(tmp_path / "d.npz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "hub.benchmarks" in err[0]
    assert not (tmp_path / "d.npz").exists()
