"""Corrupt binary inputs of the lfq steps (calibration ids, the base's safetensors, the packed
quant.safetensors) end the step with one line and exit 2, and leave no output behind."""
import dataclasses
import json

import pytest
import torch

from methods.core import cli
from methods.core.models import ModelConfig, build_model, save_model
from methods.core.results import InputError
from methods.core.tokenizer import train_tokenizer
from methods.lfq.__main__ import _load_calib, build_parser
from methods.lfq.ptq import QuantConfig
from methods.lfq.store import PACKED, load_records

QUANT = QuantConfig(bits=4, group_size=16, epochs=1, batch_size=4, lr=1e-2, chunk=256, gptq_block_size=128,
                    gptq_percdamp=0.01, gptq_act_order=False, forward_batch=4, seed=0)


def _halve(p):
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 2])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    tok = train_tokenizer(["s0123456789 the cat sees a dog."], "char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_seq_len=32), tok, 0)
    d = tmp_path_factory.mktemp("lfq") / "base"
    save_model(model, tok, d)
    return d, len(tok)


def _quantize(base_dir, calib, out, capsys):
    rc = cli.main(build_parser(), ["quantize", "--config", json.dumps(dataclasses.asdict(QUANT)),
                                   "--base", str(base_dir), "--calib", str(calib), "--out", str(out),
                                   "--methods", "rtn", "--threads", "1"])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    # transformers may draw a loading progress bar first; the step's verdict is one line
    return rc, [line for line in err.splitlines() if line.startswith("lfq quantize:")]


@pytest.mark.parametrize("damage", ["half", "empty", "garbage"])
def test_corrupt_calib_is_one_line(base, tmp_path, capsys, damage):
    d, vocab = base
    calib = tmp_path / "calib.pt"
    torch.save(torch.randint(3, vocab, (4, 16)), calib)
    {"half": _halve, "empty": lambda p: p.write_bytes(b""),
     "garbage": lambda p: p.write_bytes(bytes(range(256)) * 8)}[damage](calib)
    out = tmp_path / "q"
    rc, err = _quantize(d, calib, out, capsys)
    assert rc == 2 and len(err) == 1 and str(calib) in err[0], err
    assert not out.exists()


def test_calib_must_hold_token_ids(tmp_path):
    p = tmp_path / "calib.pt"
    torch.save({"ids": torch.zeros(2, 3)}, p)
    with pytest.raises(InputError, match="2-D tensor of token ids"):
        _load_calib(p)
    torch.save(torch.randint(0, 9, (2, 3)), p)
    assert _load_calib(p).shape == (2, 3)


def test_half_a_base_safetensors_is_one_line(base, tmp_path, capsys):
    import shutil

    d, vocab = base
    broken = tmp_path / "base"
    shutil.copytree(d, broken)
    _halve(broken / "model.safetensors")
    calib = tmp_path / "calib.pt"
    torch.save(torch.randint(3, vocab, (4, 16)), calib)
    out = tmp_path / "q"
    rc, err = _quantize(broken, calib, out, capsys)
    assert rc == 2 and len(err) == 1 and str(broken) in err[0], err
    assert not out.exists()


def test_half_a_packed_file_is_one_line(tmp_path):
    from safetensors.torch import save_file

    d = tmp_path / "quantized"
    d.mkdir()
    save_file({"x.qweight": torch.zeros(4, 4, dtype=torch.uint8)}, str(d / PACKED),
              metadata={"bits": "4", "group_size": "16"})
    _halve(d / PACKED)
    with pytest.raises(InputError, match="truncated") as e:
        load_records(d)
    assert str(d / PACKED) in str(e.value) and "\n" not in str(e.value)
    save_file({"x.qweight": torch.zeros(4, 4, dtype=torch.uint8)}, str(d / PACKED), metadata={"bits": "4"})
    with pytest.raises(InputError, match="'bits' and 'group_size'"):
        load_records(d)
