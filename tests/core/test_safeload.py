"""methods.core.safeload: good files round-trip exactly; missing, empty, half-truncated, garbage
and wrong-key files each raise a one-line InputError that names the file."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from methods.core import safeload as S
from methods.core.results import InputError


def _write_safetensors(p):
    from safetensors.torch import save_file

    t = {"w": torch.randn(64, 32), "b": torch.arange(7, dtype=torch.int64), "h": torch.randn(5).bfloat16()}
    save_file(t, str(p), metadata={"bits": "4"})
    return t


def _write_npz(p):
    a = {"x": np.random.default_rng(0).standard_normal((50, 20)), "t": np.array(["a", "bc", "déf"])}
    with open(p, "wb") as f:
        np.savez_compressed(f, **a)
    return a


def _write_pt(p):
    obj = {"state": {"w": torch.randn(40, 40)}, "n": 3, "meta": {"k": [1, 2]}}
    torch.save(obj, p)
    return obj


def _write_parquet(p):
    df = pd.DataFrame({"model": ["a", "b", "c"], "acc": [0.5, 0.25, 1.0]})
    df.to_parquet(p)
    return df


LOADERS = {  # name -> (suffix, writer, loader)
    "safetensors": (".safetensors", _write_safetensors, S.load_safetensors),
    "npz": (".npz", _write_npz, S.load_npz),
    "pt": (".pt", _write_pt, S.load_pt),
    "parquet": (".parquet", _write_parquet, S.load_parquet),
}


def _one_line_naming(excinfo, path):
    msg = str(excinfo.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert str(path) in msg, msg
    return msg


def test_safetensors_round_trip(tmp_path):
    p = tmp_path / "w.safetensors"
    t = _write_safetensors(p)
    got, meta = S.load_safetensors(p, keys=("w", "b"), metadata=True)
    assert meta == {"bits": "4"} and set(got) == set(t)
    for k in t:
        assert got[k].dtype == t[k].dtype and torch.equal(got[k], t[k])
    assert sorted(S.safetensors_keys(p)) == sorted(t)
    assert torch.equal(S.safetensors_tensor(p, "h"), t["h"])


def test_npz_round_trip(tmp_path):
    p = tmp_path / "a.npz"
    a = _write_npz(p)
    got = S.load_npz(p, keys=("x", "t"))
    assert set(got) == set(a)
    np.testing.assert_array_equal(got["x"], a["x"])
    assert got["x"].dtype == np.float64 and list(got["t"]) == ["a", "bc", "déf"]


def test_pt_round_trip(tmp_path):
    p = tmp_path / "c.pt"
    obj = _write_pt(p)
    got = S.load_pt(p, keys=("state", "n"))
    assert got["n"] == 3 and got["meta"] == {"k": [1, 2]}
    assert torch.equal(got["state"]["w"], obj["state"]["w"]) and got["state"]["w"].device.type == "cpu"


def test_parquet_round_trip(tmp_path):
    p = tmp_path / "t.parquet"
    df = _write_parquet(p)
    pd.testing.assert_frame_equal(S.load_parquet(p, columns=("model",)), df)


@pytest.mark.parametrize("kind", sorted(LOADERS))
@pytest.mark.parametrize("damage", ["half", "empty", "garbage", "text", "missing", "directory"])
def test_damaged_files_are_one_line_input_errors(tmp_path, kind, damage):
    suffix, write, load = LOADERS[kind]
    good = tmp_path / f"good{suffix}"
    write(good)
    blob = good.read_bytes()
    p = tmp_path / f"bad{suffix}"
    if damage == "half":
        p.write_bytes(blob[: len(blob) // 2])
    elif damage == "empty":
        p.write_bytes(b"")
    elif damage == "garbage":
        p.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif damage == "text":
        p.write_text('{"not": "this format"}\n' * 20)
    elif damage == "directory":
        p.mkdir()
    with pytest.raises(InputError) as e:
        load(p)
    msg = _one_line_naming(e, p)
    expect = {"half": "truncated", "empty": "empty", "missing": "missing", "directory": "not a file"}
    if damage in expect:
        assert expect[damage] in msg, msg


@pytest.mark.parametrize("kind", ["npz", "pt"])
def test_a_truncated_zip_is_called_truncated(tmp_path, kind):
    """npz and torch files are zip archives: cut anywhere, the central directory is gone."""
    suffix, write, load = LOADERS[kind]
    good = tmp_path / f"good{suffix}"
    write(good)
    blob = good.read_bytes()
    for frac in (0.1, 0.5, 0.95):
        p = tmp_path / f"cut{frac}{suffix}"
        p.write_bytes(blob[: int(len(blob) * frac)])
        with pytest.raises(InputError, match="truncated: a zip archive without its central directory"):
            load(p)


def test_missing_keys_are_named(tmp_path):
    for kind, key in (("safetensors", "w"), ("npz", "x"), ("pt", "state")):
        suffix, write, load = LOADERS[kind]
        p = tmp_path / f"f{suffix}"
        write(p)
        with pytest.raises(InputError, match=rf"has no key 'absent'.*{key}") as e:
            load(p, keys=(key, "absent"))
        _one_line_naming(e, p)
    p = tmp_path / "t.parquet"
    _write_parquet(p)
    with pytest.raises(InputError, match="has no key 'loss'"):
        S.load_parquet(p, columns=("model", "loss"))
    with pytest.raises(InputError, match="has no key 'q'"):
        S.safetensors_tensor(tmp_path / "f.safetensors", "q")


def test_npz_without_pickles(tmp_path):
    """Object arrays, a pickle named .npz and a bare .npy are refused; nothing is unpickled."""
    p = tmp_path / "obj.npz"
    np.savez(p, o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(InputError, match="Object arrays cannot be loaded"):
        S.load_npz(p)
    p = tmp_path / "pickle.npz"
    p.write_bytes(pickle.dumps({"a": np.arange(3)}))
    with pytest.raises(InputError, match="pickles are never loaded"):
        S.load_npz(p)
    p = tmp_path / "one.npy"
    np.save(p, np.arange(3))
    with pytest.raises(InputError, match="not an npz archive"):
        S.load_npz(p)


def test_a_bad_member_crc_fails_at_load_not_at_use(tmp_path):
    p = tmp_path / "a.npz"
    _write_npz(p)
    b = bytearray(p.read_bytes())
    for i in range(len(b) // 3, len(b) // 3 + 32):
        b[i] ^= 0xFF
    p.write_bytes(bytes(b))
    with pytest.raises(InputError) as e:
        S.load_npz(p)
    _one_line_naming(e, p)


class _NotAllowed:  # a global the weights-only unpickler must refuse
    pass


def test_pt_is_weights_only(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"x": _NotAllowed()}, p)
    with pytest.raises(InputError) as e:
        S.load_pt(p)
    msg = _one_line_naming(e, p)
    assert "UnpicklingError" in msg and "_NotAllowed" in msg, msg
    p = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), p)
    with pytest.raises(InputError, match="holds a Tensor, not a dict"):
        S.load_pt(p, keys=())
    assert torch.equal(S.load_pt(p), torch.zeros(3))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    p = tmp_path / "c.pt"
    _write_pt(p)
    p.chmod(0)
    try:
        with pytest.raises(InputError, match="cannot read torch file"):
            S.load_pt(p)
    finally:
        p.chmod(0o644)


def test_load_weights_refuses_weights_that_do_not_fit(tmp_path):
    """Strict loading with one-line errors: a renamed tensor, an extra one, another shape, a
    non-mapping; weights that fit load exactly as torch's own load_state_dict."""
    import torch

    from methods.core.safeload import load_weights

    torch.manual_seed(0)
    src, dst = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    good = src.state_dict()
    load_weights(dst, good, "w.pt")
    assert all(torch.equal(dst.state_dict()[k], v) for k, v in good.items())
    cases = [({"weight": good["weight"], "bias_renamed": good["bias"]}, "missing bias; unexpected bias_renamed"),
             ({**good, "extra": torch.zeros(1)}, "unexpected extra"),
             ({"weight": torch.zeros(2, 4), "bias": good["bias"]}, "tensor 'weight' has shape (2, 4), the model's is (2, 3)"),
             ([good["weight"]], "expected a mapping of tensor names to tensors, got list")]
    for state, words in cases:
        with pytest.raises(InputError) as e:
            load_weights(torch.nn.Linear(3, 2), state, tmp_path / "w.pt")
        msg = str(e.value)
        assert words in msg and str(tmp_path / "w.pt") in msg and "\n" not in msg, msg
