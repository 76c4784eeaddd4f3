"""Result files: atomic writes and a provenance block on every metrics JSON.

A step's output either exists complete or not at all: everything is written to a temporary
sibling and moved into place with `os.replace` (atomic on POSIX within one filesystem).
JSON is written strict (RFC 8259): a non-finite float (NaN, ±Infinity), which JSON cannot
hold, is written as null, which `methods.core.claims` reads as "not measured".
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

REPO_ROOT = Path(__file__).resolve().parents[2]
# The versions that decide a number; the rest is in requirements.lock.
TRACKED_PACKAGES = ("torch", "transformers", "lm_eval", "datasets", "tokenizers", "numpy",
                    "scikit-learn", "snakemake", "triton")


class InputError(Exception):
    """Bad input (missing/corrupt file, wrong config): reported as one line, exit code 2."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to `path`; move it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; a directory output gets normal modes
    target = tmp if is_dir else tmp / path.name
    try:
        yield target
        if is_dir and path.exists():
            shutil.rmtree(path)
        os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float (NaN, ±inf; also inside numpy/torch values) replaced by
    None, recursively through mappings, lists and tuples: what strict JSON can hold."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy / torch arrays and scalars
        return finite(obj.tolist())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return finite(dataclasses.asdict(obj))
    return obj


def dumps(obj: Any, **kw) -> str:
    """Strict JSON text of `obj` (non-finite floats as null, see `finite`)."""
    return json.dumps(finite(obj), allow_nan=False, default=_json_default, **kw)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing input file: {path}")
    try:
        return json.loads(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"corrupt JSON in {path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise InputError(f"corrupt JSON in {path}: {e}") from None


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing input file: {path}")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"corrupt JSONL in {path}: not UTF-8 text") from None
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise InputError(f"corrupt JSONL in {path} line {i}: {e}") from None
    return rows


def write_jsonl(path: str | os.PathLike, rows: list[dict]) -> None:
    write_text(path, "".join(dumps(r, sort_keys=True) + "\n" for r in rows))


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy / torch arrays and scalars
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def config_hash(cfg: Any) -> str:
    blob = json.dumps(cfg, sort_keys=True, default=_json_default).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return None


def provenance(cfg: Any = None, seed: int | None = None, wall_s: float | None = None,
               llm: Any = None) -> dict:
    """The provenance block. `llm`: where a result came from language models, what answered and
    how it was sampled (`methods.core.llm.llm_provenance`, one dict or {name: dict}); absent
    otherwise. API keys never enter it."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    extra = {} if llm is None else {"llm": llm}
    return {**extra,
        "git_sha": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": {p: _version(p) for p in TRACKED_PACKAGES},
        "python": platform.python_version(),
        "config_hash": None if cfg is None else config_hash(cfg),
        "seed": seed,
        "wall_s": None if wall_s is None else round(wall_s, 3),
        "host": socket.gethostname(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
    }


def write_metrics(path: str | os.PathLike, metrics: dict, cfg: Any = None,
                  seed: int | None = None, wall_s: float | None = None, llm: Any = None) -> None:
    """Write `metrics` with a provenance block under the key "provenance" (`llm`: see provenance)."""
    write_json(path, {**metrics, "provenance": provenance(cfg, seed, wall_s, llm)})
