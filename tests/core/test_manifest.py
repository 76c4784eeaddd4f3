"""MANIFEST.json of a data directory: written last and atomically by a data step, checked by
the steps that read it (methods/core/manifest.py, wired through methods/core/cli.py).

The damaged-data cases are the ones that used to run to exit 0: a deleted people.jsonl
(wd_plasticity's probes then reported `not_checked`), a train.jsonl cut at a line boundary
(200 -> 50 rows, still valid JSONL) and a pretrain.txt cut to 10 %.
"""
import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from methods.core import cli, manifest
from methods.core.results import InputError

ROOT = Path(__file__).resolve().parents[2]
ADVICE = "the data directory was changed after it was written; rerun its data step"


def _tree(d: Path) -> Path:
    (d / "tasks" / "T2").mkdir(parents=True)
    (d / "people.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(100)))
    (d / "tasks" / "T2" / "train.jsonl").write_text("".join(json.dumps({"x": i}) + "\n" for i in range(200)))
    (d / "pretrain.txt").write_text("".join(f"line {i} of the corpus\n" for i in range(1000)))
    (d / "weights.bin").write_bytes(bytes(range(256)) * 40)
    return d


def _cut_rows(p: Path, n: int) -> None:
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:n]))


def _cut_bytes(p: Path, frac: float) -> None:
    b = p.read_bytes()
    p.write_bytes(b[:int(len(b) * frac)])


def test_manifest_matches_an_independent_computation(tmp_path):
    d = _tree(tmp_path / "data")
    (d / ".snakemake_timestamp").write_text("")           # hidden: not listed
    m = manifest.write_manifest(d)
    assert json.loads((d / "MANIFEST.json").read_text()) == m
    assert sorted(m["files"]) == ["people.jsonl", "pretrain.txt", "tasks/T2/train.jsonl", "weights.bin"]
    for rel, e in m["files"].items():
        raw = (d / rel).read_bytes()
        assert e["bytes"] == len(raw) and e["sha256"] == hashlib.sha256(raw).hexdigest()
        assert e.get("lines") == (len(raw.decode().splitlines()) if rel.endswith((".jsonl", ".txt")) else None)
    assert m["files"]["tasks/T2/train.jsonl"]["lines"] == 200
    assert manifest.verify(d) is True


def test_hash_streams_chunks_and_counts_an_unterminated_last_line(tmp_path):
    p = tmp_path / "big.txt"
    data = b"".join(b"%07d\n" % i for i in range(400_000))[:-1]     # ~3.2 MiB: several chunks, no final newline
    p.write_bytes(data)
    e = manifest.describe(p)
    assert len(data) > 3 * manifest.CHUNK
    assert e == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "lines": 400_000}


@pytest.mark.parametrize("damage,rel,msg", [
    (lambda d: (d / "people.jsonl").unlink(), "people.jsonl",
     "missing (the manifest lists it: 100 rows, 1090 bytes)"),
    (lambda d: _cut_rows(d / "tasks/T2/train.jsonl", 50), "tasks/T2/train.jsonl",
     "50 rows, manifest says 200 (sha256 differs)"),
    (lambda d: _cut_bytes(d / "pretrain.txt", 0.1), "pretrain.txt",
     "105 lines, manifest says 1000 (sha256 differs)"),
    (lambda d: (d / "weights.bin").write_bytes(bytes(range(256)) * 39), "weights.bin",
     "9984 bytes, manifest says 10240 (sha256 differs)"),
    (lambda d: (d / "weights.bin").write_bytes(bytes(range(1, 256)) + b"\0" + bytes(range(256)) * 39),
     "weights.bin", "sha256 differs (same 10240 bytes)"),
    (lambda d: (d / "tasks/T2/extra.jsonl").write_text("{}\n"), "tasks/T2/extra.jsonl", "not in the manifest"),
])
def test_damage_is_one_line_naming_the_file(tmp_path, damage, rel, msg):
    d = _tree(tmp_path / "data")
    manifest.write_manifest(d)
    damage(d)
    with pytest.raises(InputError) as e:
        manifest.verify(d)
    assert str(e.value) == f"{d / rel}: {msg}: {ADVICE}"
    assert "\n" not in str(e.value)


def test_files_subset_and_subdirectory(tmp_path):
    d = _tree(tmp_path / "data")
    manifest.write_manifest(d)
    (d / "people.jsonl").unlink()
    assert manifest.verify(d, ["pretrain.txt", "tasks/T2"]) is True          # people.jsonl not asked for
    _cut_rows(d / "tasks/T2/train.jsonl", 50)
    with pytest.raises(InputError, match="train.jsonl: 50 rows, manifest says 200"):
        manifest.verify(d, ["tasks/T2"])
    with pytest.raises(InputError, match=r"data/val.txt: missing, and not in the manifest either"):
        manifest.verify(d, ["val.txt"])
    (d / "val.txt").write_text("x\n")
    with pytest.raises(InputError, match=r"data/val.txt: not in the manifest"):
        manifest.verify(d, ["val.txt"])


def test_no_manifest_warns_once_and_passes(tmp_path, capsys):
    d = _tree(tmp_path / "old")
    assert manifest.verify(d) is False
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {d} has no MANIFEST.json")


def test_corrupt_manifest_and_missing_directory(tmp_path):
    d = _tree(tmp_path / "data")
    (d / "MANIFEST.json").write_text('{"format": 1, "files": {"a": {"bytes": "x"}}}')
    with pytest.raises(InputError, match="MANIFEST.json: corrupt manifest"):
        manifest.verify(d)
    with pytest.raises(InputError, match="missing data directory"):
        manifest.verify(tmp_path / "nope")


def test_failed_manifest_write_leaves_no_manifest(tmp_path, monkeypatch):
    d = _tree(tmp_path / "data")

    def boom(p):
        raise OSError("disk gone")

    monkeypatch.setattr(manifest, "describe", boom)
    with pytest.raises(OSError):
        manifest.write_manifest(d)
    assert not (d / "MANIFEST.json").exists()
    assert not [p for p in d.iterdir() if p.name.startswith(".")]          # no temporary left


# ---- the CLI wiring: a data step seals its --out, a consumer verifies its path arguments ----
def _use(a):
    Path(a.out).write_text("used\n")


def _parser(produce, use=_use):
    p, sub = cli.subcommands("toy", "toy steps")
    s = sub.add_parser("data")
    s.set_defaults(func=produce, writes_data="out")
    s.add_argument("--out", required=True)
    s = sub.add_parser("use")
    s.set_defaults(func=use)
    s.add_argument("--config", default='{"data": "x"}')
    s.add_argument("--data", nargs="+", default=[])
    s.add_argument("--out", required=True)
    return p


def _produce(a):
    _tree(Path(a.out))


def test_data_step_writes_manifest_consumer_verifies(tmp_path, capsys):
    d, out = tmp_path / "data", tmp_path / "o.txt"
    assert cli.main(_parser(_produce), ["data", "--out", str(d)]) == 0
    assert manifest.verify(d)
    args = ["use", "--data", str(d), str(d / "tasks/T2/train.jsonl"), "--out", str(out)]
    assert cli.main(_parser(_produce), args) == 0 and out.read_text() == "used\n"
    out.unlink()
    _cut_rows(d / "tasks/T2/train.jsonl", 50)
    capsys.readouterr()
    # the file argument alone is enough: its manifest is found two directories up
    assert cli.main(_parser(_produce), ["use", "--data", str(d / "tasks/T2/train.jsonl"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"toy use: error: {d}/tasks/T2/train.jsonl: 50 rows, manifest says 200 (sha256 differs): {ADVICE}"]
    assert not out.exists()


def test_data_without_manifest_warns_after_success_only(tmp_path, capsys):
    old, out = _tree(tmp_path / "old"), tmp_path / "o.txt"
    assert cli.main(_parser(_produce), ["use", "--data", str(old), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"warning: {old} has no MANIFEST.json (written before manifests existed?): its files are not verified"
    assert len(err) == 2 and "done in" in err[1]
    # a step failing for another reason still prints its one line
    def fails(a):
        raise InputError("x")

    assert cli.main(_parser(_produce, fails), ["use", "--data", str(old), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == ["toy use: error: x"]


def test_failed_data_step_writes_no_manifest(tmp_path):
    d = tmp_path / "data"

    def half(a):
        (Path(a.out)).mkdir()
        (Path(a.out) / "train.jsonl").write_text("{}\n")
        raise InputError("source ran dry")

    assert cli.main(_parser(half), ["data", "--out", str(d)]) == 2
    assert not (d / "MANIFEST.json").exists()


def test_verify_inputs_skips_outputs_json_and_absent_paths(tmp_path, capsys):
    d = _tree(tmp_path / "data")
    manifest.write_manifest(d)
    (d / "people.jsonl").unlink()
    ns = argparse.Namespace(out=str(d), config=json.dumps({"data": str(d)}), data=str(tmp_path / "nope"),
                            model=str(tmp_path), runs=[str(tmp_path / "x.json")])
    assert manifest.verify_inputs(ns) == []         # nothing here is a data input with a manifest
    old = _tree(tmp_path / "old")
    assert manifest.verify_inputs(argparse.Namespace(data=str(old))) == [old]
    assert capsys.readouterr().err == ""            # the warning comes after the step (after_step)
    with pytest.raises(InputError, match="people.jsonl: missing"):
        manifest.verify_inputs(argparse.Namespace(base=str(d)))


# ---- the real steps: wd_plasticity's data step and the steps that read its directory ----
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["wd_plasticity"]["world"]
    d = tmp_path_factory.mktemp("wd") / "data"
    r = subprocess.run([sys.executable, "-m", "methods.wd_plasticity", "data", "--config", json.dumps(cfg),
                        "--out", str(d)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def _run(*argv):
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("case", ["people", "train_rows", "pretrain_10pct"])
def test_real_consumers_reject_damaged_world(world, tmp_path, case):
    import shutil

    d = tmp_path / "data"
    shutil.copytree(world, d)
    out = tmp_path / "out"
    if case == "people":      # probes: used to skip the probe silently (`not_checked`)
        (d / "people.jsonl").unlink()
        r = _run("methods.wd_plasticity", "probes", "--config", "{}", "--base", str(tmp_path), "--data", str(d),
                 "--shards", str(tmp_path), "--out", str(out), "--seq-len", "8", "--weight-decay", "0", "--seed", "0")
        want = f"{d}/people.jsonl: missing (the manifest lists it: 100 rows"
    elif case == "train_rows":   # finetune reads tasks/T2/ (its --task-dir)
        _cut_rows(d / "tasks/T2/train.jsonl", 50)
        r = _run("methods.wd_plasticity", "finetune", "--config", "{}", "--base", str(tmp_path),
                 "--task-dir", str(d / "tasks/T2"), "--out", str(out), "--metrics", str(tmp_path / "m.json"),
                 "--seed", "0")
        want = f"{d}/tasks/T2/train.jsonl: 50 rows, manifest says 200 (sha256 differs)"
    else:                        # the shards step reads data/pretrain.txt
        _cut_bytes(d / "pretrain.txt", 0.1)
        r = _run("methods.core", "shards", "--source", str(d / "pretrain.txt"), "--val-source", str(d / "val.txt"),
                 "--tokenizer", str(tmp_path), "--out", str(out))
        want = f"{d}/pretrain.txt: 130 lines, manifest says 1306 (sha256 differs)"
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert want in lines[0] and lines[0].endswith(ADVICE), lines[0]
    assert not out.exists() and not (tmp_path / "m.json").exists()
    assert manifest.verify(world)                                               # the original is untouched


# ---- single-file data outputs: a sidecar <file>.manifest.json ----
def test_single_file_output_gets_a_sidecar_its_consumers_verify(tmp_path, capsys):
    f, out = tmp_path / "scenarios.jsonl", tmp_path / "o.txt"

    def produce(a):
        Path(a.out).write_text("".join(json.dumps({"id": i}) + "\n" for i in range(40)))

    assert cli.main(_parser(produce), ["data", "--out", str(f)]) == 0
    side = manifest.sidecar(f)
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert json.loads(side.read_text())["files"] == {"scenarios.jsonl": {"bytes": f.stat().st_size,
                                                                         "sha256": want, "lines": 40}}
    assert manifest.verify_file(f)
    assert cli.main(_parser(produce), ["use", "--data", str(f), "--out", str(out)]) == 0
    out.unlink()
    f.write_text("".join(f.read_text().splitlines(keepends=True)[:10]))   # cut at a line boundary
    capsys.readouterr()
    assert cli.main(_parser(produce), ["use", "--data", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"toy use: error: {f}: 10 rows, manifest says 40 (sha256 differs): {ADVICE}"]
    assert not out.exists()
    side.unlink()                                # older results without a sidecar: accepted
    assert manifest.verify_file(f) is False
    assert cli.main(_parser(produce), ["use", "--data", str(f), "--out", str(out)]) == 0


@pytest.mark.parametrize("module", ["methods.pid.__main__", "methods.remoe.__main__", "methods.pse.__main__"])
def test_single_file_data_steps_are_sealed(module):
    """pid's data.npz, remoe's corpus.npz and pse's scenarios.jsonl are data steps' single-file outputs."""
    import importlib

    parser = importlib.import_module(module).build_parser()
    step = "scenarios" if module.startswith("methods.pse") else "data"
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices[step].get_default("writes_data") == "out"
