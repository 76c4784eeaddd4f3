"""A corrupt embedding cache (emb.npz) ends the build / retrieve / theory steps with one line and
exit 2, and leaves no output behind."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from methods.core import cli
from methods.core.results import InputError
from methods.memora.__main__ import build_parser
from methods.memora.run import load_cache

ROOT = Path(__file__).resolve().parents[2]
CFG = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["memora"]


def _run(argv, capsys):
    rc = cli.main(build_parser(), argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, err.strip().splitlines()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("memora") / "data"
    assert cli.main(build_parser(), ["data", "--config", json.dumps(CFG), "--out", str(d)]) == 0
    return d


def _emb(p: Path, damage: str) -> Path:
    with open(p, "wb") as f:
        np.savez(f, texts=np.array(["a memory", "another"]), vecs=np.eye(2, 8, dtype=np.float32))
    b = p.read_bytes()
    if damage == "half":
        p.write_bytes(b[: len(b) // 2])
    elif damage == "empty":
        p.write_bytes(b"")
    elif damage == "garbage":
        p.write_bytes(bytes(range(256)) * 16)
    elif damage == "no_vecs":
        with open(p, "wb") as f:
            np.savez(f, texts=np.array(["a"]))
    return p


@pytest.mark.parametrize("step", ["build", "retrieve", "theory"])
@pytest.mark.parametrize("damage", ["half", "empty", "garbage", "no_vecs"])
def test_corrupt_embedding_cache_is_one_line(data_dir, tmp_path, capsys, step, damage):
    emb = _emb(tmp_path / "emb.npz", damage)
    out = tmp_path / "out.json"
    argv = [step, "--config", json.dumps(CFG), "--data", str(data_dir), "--emb", str(emb), "--out", str(out)]
    if step in ("build", "retrieve"):
        argv += ["--store", "rag"]
    if step == "retrieve":
        built = tmp_path / "built.json"
        built.write_text(json.dumps({"info": {}, "stores": {}}))
        argv += ["--policy", "semantic", "--built", str(built)]
    rc, err = _run(argv, capsys)
    assert rc == 2 and len(err) == 1 and str(emb) in err[0], err
    if damage == "no_vecs":
        assert "'vecs'" in err[0]
    assert not out.exists()


def test_load_cache_round_trip_and_damage(tmp_path):
    p = _emb(tmp_path / "emb.npz", "none")
    cache = load_cache(str(p), "hash")
    np.testing.assert_array_equal(cache(["another", "a memory"]), np.eye(2, 8, dtype=np.float32)[::-1])
    assert cache.misses == 0
    with pytest.raises(InputError, match="truncated"):
        load_cache(str(_emb(tmp_path / "h.npz", "half")), "hash")
