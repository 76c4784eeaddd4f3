"""Corrupt binary inputs of the remoe steps (corpus.npz, a checkpoint .pt, routing traces) end
the step with one line and exit 2, and leave no output behind."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from methods.core import cli
from methods.core.results import InputError
from methods.remoe import data as D, model as M
from methods.remoe.__main__ import build_parser
from methods.remoe.hub import read_gates

ROOT = Path(__file__).resolve().parents[2]
SEC = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["remoe"]


def _damage(p: Path, how: str) -> Path:
    b = p.read_bytes() if p.exists() else b""
    p.write_bytes({"half": b[: len(b) // 2], "empty": b"", "garbage": bytes(range(256)) * 16}[how])
    return p


def _run(argv, capsys):
    rc = cli.main(build_parser(), argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, [line for line in err.splitlines() if line.startswith("remoe ")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("remoe") / "corpus.npz"
    cfg = {**SEC["data"], "n_train": 8, "n_eval": 4}
    assert cli.main(build_parser(), ["data", "--config", json.dumps(cfg), "--out", str(p)]) == 0
    return p


def _ft_cfg():
    return {**SEC["finetune"], "variant": SEC["variants"][0], "seed": 0}


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_pretrain_corrupt_corpus(corpus, tmp_path, capsys, how):
    bad = tmp_path / "corpus.npz"
    bad.write_bytes(corpus.read_bytes())
    _damage(bad, how)
    out, log = tmp_path / "base.pt", tmp_path / "log.json"
    rc, err = _run(["pretrain", "--config", json.dumps(SEC["pretrain"]), "--data", str(bad), "--out", str(out),
                    "--log_json", str(log), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and str(bad) in err[0], err
    assert not out.exists() and not log.exists()


def test_corpus_missing_arrays_are_named(tmp_path):
    p = tmp_path / "corpus.npz"
    with open(p, "wb") as f:
        np.savez(f, vocab=np.array("ab"), train_ids=np.zeros((2, 3), np.uint8))
    with pytest.raises(InputError, match="has no key 'train_dom'"):
        D.load(p)


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_finetune_corrupt_base(corpus, tmp_path, capsys, how):
    base = tmp_path / "base.pt"
    torch.save({"model": {}, "moe": {}, "vocab_size": 3, "state": {"w": torch.zeros(64, 64)}, "meta": {}}, base)
    _damage(base, how)
    out, log = tmp_path / "ft.pt", tmp_path / "log.json"
    rc, err = _run(["finetune", "--config", json.dumps(_ft_cfg()), "--base", str(base), "--data", str(corpus),
                    "--out", str(out), "--log_json", str(log), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and str(base) in err[0], err
    assert not out.exists() and not log.exists()


def test_finetune_base_without_state_is_named(corpus, tmp_path, capsys):
    base = tmp_path / "base.pt"
    torch.save({"model": {}, "moe": {}, "vocab_size": 3}, base)
    out = tmp_path / "ft.pt"
    rc, err = _run(["finetune", "--config", json.dumps(_ft_cfg()), "--base", str(base), "--data", str(corpus),
                    "--out", str(out), "--log_json", str(tmp_path / "log.json"), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and "has no key 'state'" in err[0], err
    assert not out.exists()


def test_trace_corrupt_checkpoint(corpus, tmp_path, capsys):
    ck = _damage(tmp_path / "base.pt", "garbage")
    out = tmp_path / "traces"
    rc, err = _run(["trace", "--config", json.dumps({**SEC["trace"], "n_docs": 4}), "--data", str(corpus), "--out", str(out),
                    "--ckpts", str(ck), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and str(ck) in err[0], err
    assert not any(out.glob("*.npz"))


def test_analyze_corrupt_trace(tmp_path, capsys):
    traces = tmp_path / "traces"
    traces.mkdir()
    with open(traces / "base.npz", "wb") as f:
        np.savez(f, topk=np.zeros((1, 1, 4, 2), np.int64), n_experts=8, ppl=1.0)
    _damage(traces / "base.npz", "half")
    outs = [tmp_path / n for n in ("table.csv", "summary.json", "fig.png")]
    rc, err = _run(["analyze", "--config", json.dumps(SEC["analysis"]), "--traces", str(traces),
                    "--table", str(outs[0]), "--summary", str(outs[1]), "--figure", str(outs[2])], capsys)
    assert rc == 2 and len(err) == 1 and str(traces / "base.npz") in err[0], err
    assert not any(p.exists() for p in outs)


def test_gate_file_damage(tmp_path):
    p = _damage(tmp_path / "gates.pt", "empty")
    with pytest.raises(InputError, match="empty torch file"):
        read_gates(p)
    torch.save({"gates": {}}, p)
    with pytest.raises(InputError, match="no hub_id"):
        read_gates(p)
    torch.save([1, 2], p)
    with pytest.raises(InputError, match="not a dict"):
        M.load(p)


@pytest.mark.parametrize("moe,words", [({"bogus": 1}, "the saved model config does not fit"),
                                       (SEC["pretrain"]["moe"], "do not fit the model: missing")])
def test_finetune_base_that_does_not_fit_is_one_line(corpus, tmp_path, capsys, moe, words):
    """A readable checkpoint whose config or tensor names are not this model's: one line naming
    the file (torch's load_state_dict error is many lines)."""
    base = tmp_path / "base.pt"
    torch.save({"model": SEC["pretrain"]["model"], "moe": moe, "vocab_size": 3, "state": {"w": torch.zeros(2)},
                "meta": {}}, base)
    out = tmp_path / "ft.pt"
    rc, err = _run(["finetune", "--config", json.dumps(_ft_cfg()), "--base", str(base), "--data", str(corpus),
                    "--out", str(out), "--log_json", str(tmp_path / "log.json"), "--threads", "1"], capsys)
    assert rc == 2 and len(err) == 1 and words in err[0] and str(base) in err[0], err
    assert not out.exists()
