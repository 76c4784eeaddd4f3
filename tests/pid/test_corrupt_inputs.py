"""Corrupt binary inputs of the pid steps (data.npz, the trained mixtures' .pt files, decisions)
end the step with one line and exit 2, and leave no output behind."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from methods.core import cli
from methods.core.results import InputError
from methods.pid.__main__ import _load_npz, build_parser

ROOT = Path(__file__).resolve().parents[2]
SEC = yaml.safe_load((ROOT / "config" / "scales" / "tiny.yaml").read_text())["pid"]


def _damage(p: Path, how: str) -> Path:
    b = p.read_bytes()
    p.write_bytes({"half": b[: len(b) // 2], "empty": b"", "garbage": bytes(range(256)) * 16}[how])
    return p


def _npz(p: Path) -> Path:
    with open(p, "wb") as f:
        np.savez_compressed(f, **{"test/x": np.arange(6.0), "profile/x": np.ones(3)})
    return p


def _pt(p: Path) -> Path:
    torch.save({"mid": {"w": torch.randn(8, 8)}, "final": {"w": torch.randn(8, 8)}}, p)
    return p


def _run(argv, capsys):
    rc = cli.main(build_parser(), argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, err.strip().splitlines()


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_decide_corrupt_data(tmp_path, capsys, how):
    data = _damage(_npz(tmp_path / "data.npz"), how)
    out, inter = tmp_path / "decisions.npz", tmp_path / "interventions.json"
    rc, err = _run(["decide", "--config", json.dumps(SEC["train"]), "--data", str(data), "--out", str(out),
                    "--interventions", str(inter), "--threads", "1", "--models", str(_pt(tmp_path / "balanced.pt"))],
                   capsys)
    assert rc == 2 and len(err) == 1 and str(data) in err[0], err
    assert not out.exists() and not inter.exists()


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_decide_corrupt_model(tmp_path, capsys, how):
    model = _damage(_pt(tmp_path / "balanced.pt"), how)
    out, inter = tmp_path / "decisions.npz", tmp_path / "interventions.json"
    rc, err = _run(["decide", "--config", json.dumps(SEC["train"]), "--data", str(_npz(tmp_path / "data.npz")),
                    "--out", str(out), "--interventions", str(inter), "--threads", "1", "--models", str(model)],
                   capsys)
    assert rc == 2 and len(err) == 1 and str(model) in err[0], err
    assert not out.exists() and not inter.exists()


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_reweight_corrupt_model(tmp_path, capsys, how):
    mix = SEC["reweight"]["base"].rpartition("_")[0]
    model = _damage(_pt(tmp_path / f"{mix}.pt"), how)
    out = tmp_path / "reweight.json"
    cfg = {k: SEC[k] for k in ("train", "pid", "reweight")}
    rc, err = _run(["reweight", "--config", json.dumps(cfg), "--data", str(_npz(tmp_path / "data.npz")),
                    "--out", str(out), "--threads", "1", "--models", str(model)], capsys)
    assert rc == 2 and len(err) == 1 and str(model) in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("which", ["data", "decisions"])
def test_pid_corrupt_npz(tmp_path, capsys, which):
    files = {w: _npz(tmp_path / f"{w}.npz") for w in ("data", "decisions")}
    _damage(files[which], "half")
    out = tmp_path / "pid.json"
    rc, err = _run(["pid", "--config", json.dumps(SEC["pid"]), "--data", str(files["data"]),
                    "--decisions", str(files["decisions"]), "--out", str(out), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and str(files[which]) in err[0] and "truncated" in err[0], err
    assert not out.exists()


def test_npz_names_and_round_trip(tmp_path):
    got = _load_npz(_npz(tmp_path / "d.npz"))
    np.testing.assert_array_equal(got["test"]["x"], np.arange(6.0))
    with open(tmp_path / "flat.npz", "wb") as f:
        np.savez(f, x=np.zeros(2))
    with pytest.raises(InputError, match="not named '<group>/<name>'"):
        _load_npz(tmp_path / "flat.npz")


def test_a_model_file_must_hold_checkpoints(tmp_path, capsys):
    torch.save(torch.zeros(3), tmp_path / "balanced.pt")
    rc, err = _run(["decide", "--config", json.dumps(SEC["train"]), "--data", str(_npz(tmp_path / "data.npz")),
                    "--out", str(tmp_path / "o.npz"), "--interventions", str(tmp_path / "i.json"), "--threads", "1",
                    "--models", str(tmp_path / "balanced.pt")], capsys)
    assert rc == 2 and len(err) == 1 and "not a dict" in err[0], err
