"""MANIFEST.json: what a data step wrote, so that the steps reading it can tell a damaged directory.

A data step's directory gets, as its last file, `MANIFEST.json`: for every file (relative path)
its size in bytes, its sha256 and, for `.jsonl` / `.txt`, its line count. The manifest is written
atomically after everything else, so its presence marks the directory complete. A consuming step
recomputes the same numbers before it reads anything: a deleted file, a file cut at a line
boundary (still valid JSONL, silently fewer rows) or a truncated corpus is then a one-line
`InputError` naming the file, instead of a smaller experiment that exits 0.

Wiring (`methods.core.cli.main`): a step whose parser sets `writes_data="out"` (the data steps of
every paper) gets the manifest of its `--out` directory written after the step returns (`after_step`); every
other step's path arguments are verified before it runs (`verify_inputs`): a directory holding a
manifest is verified whole (listed files present and unchanged, no unlisted files), a file or
sub-directory inside one (within `MAX_DEPTH` levels, e.g. `data/tasks/T2/train.jsonl`) only for
its own files. A `--data` directory without a manifest (results written before manifests
existed) is accepted with a one-line warning on stderr, printed once the step has succeeded.

A data step whose output is one file (pid's `data.npz`, remoe's `corpus.npz`, pse's
`scenarios.jsonl`) gets a sidecar `<file>.manifest.json` of the same format listing that file
alone; a step reading the file verifies it against the sidecar.

Names starting with "." (Snakemake's `.snakemake_timestamp`, temporary files of atomic writes)
are not listed and not checked. Hashing streams 1 MiB chunks; a consumer reads each input file
once more than it would otherwise.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Iterable

from .results import InputError, write_json

NAME = "MANIFEST.json"
SIDECAR = ".manifest.json"            # suffix of a single-file output's manifest: <file>.manifest.json
FORMAT = 1
CHUNK = 1 << 20                       # bytes per read while hashing
LINE_SUFFIXES = (".jsonl", ".txt")     # files whose line count is recorded (rows of a JSONL file)
MAX_DEPTH = 4                          # how many parent directories of an input path are searched for a manifest
WRITES = "writes_data"                 # parser default naming the argument of a data step's output directory
ADVICE = "the data directory was changed after it was written; rerun its data step"
# arguments that are never inputs: outputs, the config JSON, runtime knobs
_NOT_INPUTS = {"out", "config", "set", "print_config", "func", "command", "runtime", "threads", WRITES}


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _listing(d: Path) -> list[str]:
    """Relative posix paths of the files under `d` (not hidden ones, not the manifest), sorted."""
    out = []
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        rel_root = Path(root).relative_to(d)
        for f in files:
            rel = (rel_root / f).as_posix()
            if not f.startswith(".") and rel != NAME:
                out.append(rel)
    return sorted(out)


def describe(path: str | os.PathLike) -> dict:
    """{"bytes", "sha256"} of one file, plus "lines" for .jsonl / .txt (a last line without its
    newline counts), read once in CHUNK-sized pieces."""
    p = Path(path)
    h = hashlib.sha256()
    size = lines = 0
    last = b"\n"
    with open(p, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    entry = {"bytes": size, "sha256": h.hexdigest()}
    if p.suffix in LINE_SUFFIXES:
        entry["lines"] = lines + (last != b"\n")
    return entry


def sidecar(path: str | os.PathLike) -> Path:
    """The manifest file of a single-file data output."""
    return Path(str(path) + SIDECAR)


def write_manifest(d: str | os.PathLike) -> dict:
    """Write `d/MANIFEST.json` describing every file under `d` (call it when the directory is
    finished: the manifest is its last file, written atomically); for a file `d`, the sidecar
    `d.manifest.json` describing it alone. Returns the manifest."""
    d = Path(d)
    if d.is_file():
        manifest = {"format": FORMAT, "generated_by": "methods.core.manifest.write_manifest",
                    "files": {d.name: describe(d)}}
        write_json(sidecar(d), manifest)
        return manifest
    if not d.is_dir():
        raise InputError(f"cannot write a manifest: {d} is neither a file nor a directory")
    manifest = {"format": FORMAT, "generated_by": "methods.core.manifest.write_manifest",
                "files": {rel: describe(d / rel) for rel in _listing(d)}}
    write_json(d / NAME, manifest)
    return manifest


def read_manifest(d: str | os.PathLike, f: Path | None = None) -> dict | None:
    """The manifest of directory `d` (or the manifest file `f`), or None where it has none; a
    corrupt one is an InputError."""
    f = Path(d) / NAME if f is None else f
    if not f.is_file():
        return None
    try:
        m = json.loads(f.read_text())
        files = m["files"]
        if m.get("format") != FORMAT or not isinstance(files, dict) or not all(
                isinstance(e, dict) and isinstance(e.get("bytes"), int) and isinstance(e.get("sha256"), str)
                for e in files.values()):
            raise ValueError(f"not a format-{FORMAT} manifest")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{f}: corrupt manifest ({type(e).__name__}: {e}); rerun its data step") from None
    return m


def _count(entry: dict, rel: str) -> str:
    unit = "rows" if rel.endswith(".jsonl") else "lines"
    return f"{entry['lines']} {unit}" if "lines" in entry else f"{entry['bytes']} bytes"


def _problem(d: Path, rel: str, want: dict | None) -> str | None:
    """What is wrong with file `rel` of `d` against its manifest entry (None: nothing)."""
    p = d / rel
    if want is None:
        return "missing, and not in the manifest either" if not p.is_file() else "not in the manifest"
    if not p.is_file():
        return f"missing (the manifest lists it: {_count(want, rel)}, {want['bytes']} bytes)"
    have = describe(p)
    if have["sha256"] == want["sha256"]:
        return None
    if "lines" in want and have.get("lines") != want["lines"]:
        return f"{_count(have, rel)}, manifest says {want['lines']} (sha256 differs)"
    if have["bytes"] != want["bytes"]:
        return f"{have['bytes']} bytes, manifest says {want['bytes']} (sha256 differs)"
    return f"sha256 differs (same {have['bytes']} bytes)"


def _warn_unverified(d: Path) -> None:
    print(f"warning: {d} has no {NAME} (written before manifests existed?): its files are not verified",
          file=sys.stderr)


def verify(d: str | os.PathLike, files: Iterable[str] | None = None) -> bool:
    """Check `d` against its manifest; raise a one-line InputError naming the first file that
    is missing, unlisted or changed. `files` (relative paths; a sub-directory stands for the
    files under it): check only those, each of which must be listed; None: every listed file,
    and no unlisted file may have been added. Without a manifest: a warning on stderr, False."""
    d = Path(d)
    if not d.is_dir():
        raise InputError(f"missing data directory: {d}")
    m = read_manifest(d)
    if m is None:
        _warn_unverified(d)
        return False
    listed = m["files"]
    everything = sorted(set(listed) | set(_listing(d)))     # listed or present
    if files is None:
        names = everything
    else:
        names = []
        for f in files:
            rel = Path(f).as_posix().strip("/")
            if rel in ("", "."):
                names += everything
            elif (d / rel).is_dir() or any(k.startswith(rel + "/") for k in listed):
                names += [k for k in everything if k.startswith(rel + "/")]
            else:
                names.append(rel)
    for rel in names:
        if _hidden(rel):
            continue
        problem = _problem(d, rel, listed.get(rel))
        if problem:
            raise InputError(f"{d / rel}: {problem}: {ADVICE}")
    return True


def verify_file(path: str | os.PathLike) -> bool:
    """Check a single-file data output against its sidecar manifest (one-line InputError when it
    changed); False where it has none."""
    p = Path(path)
    m = read_manifest(p.parent, sidecar(p))
    if m is None:
        return False
    problem = _problem(p.parent, p.name, m["files"].get(p.name))
    if problem:
        raise InputError(f"{p}: {problem}: {ADVICE}")
    return True


def _manifest_root(v: str) -> tuple[Path, Path] | tuple[None, None]:
    """(the directory holding the manifest that covers path `v`: `v` itself or the nearest of
    its MAX_DEPTH parents, `v` relative to it) or (None, None). The directory keeps the
    spelling of `v` where it can (messages name the path the step was given)."""
    p = Path(os.path.abspath(v))
    for k, q in enumerate([p, *p.parents][:MAX_DEPTH + 1]):
        if (q / NAME).is_file():
            shown = Path(os.path.normpath(v))
            for _ in range(k):
                shown = shown.parent
            return (shown if os.path.abspath(shown) == str(q) else q), Path(*p.parts[len(q.parts):])
    return None, None


def verify_inputs(args) -> list[Path]:
    """Verify every existing path among a step's arguments (argparse namespace) that lies in a
    directory with a manifest. Outputs (`out`, the data step's own directory) and paths that do
    not exist yet are skipped. Returns the `data` directories without a manifest (older results:
    accepted; `after_step` warns about them once the step has succeeded, so that a step failing
    for another reason still prints one line)."""
    ns = vars(args)
    skip = _NOT_INPUTS | {ns.get(WRITES)}
    whole: set[str] = set()
    unverified: list[Path] = []
    for key, value in ns.items():
        if key in skip:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            # a str that names an existing path (os.path.exists is False for JSON, long strings)
            if not isinstance(v, str) or not v or not os.path.exists(v):
                continue
            if os.path.isfile(v) and sidecar(v).is_file():
                verify_file(v)
                continue
            root, rel = _manifest_root(v)
            if root is None:
                if key == "data" and os.path.isdir(v):
                    unverified.append(Path(v))
            elif os.path.abspath(root) not in whole:
                if rel == Path():
                    whole.add(os.path.abspath(root))
                    verify(root)
                else:
                    verify(root, [rel.as_posix()])
    return unverified


def after_step(args, unverified: Iterable[Path] = ()) -> None:
    """After a step succeeded: a data step (its parser sets `writes_data` to the name of its
    output argument) gets the manifest of that directory written, its last file; a step that
    read `data` directories without a manifest warns about each, one line."""
    dest = getattr(args, WRITES, None)
    if dest:
        write_manifest(getattr(args, dest))
    for d in unverified:
        _warn_unverified(d)
