"""Safe readers for the binary artifacts of the DAG: safetensors, NumPy `.npz`, PyTorch `.pt`,
Parquet tables.

Every failure (missing, not a file, empty, truncated or corrupt, a pickle where arrays were
expected, a required key absent) is one line: `InputError` naming the file and the problem,
never a traceback from zipfile, pickle, safetensors or torch. Nothing here runs a pickle:
`np.load(allow_pickle=False)` and `torch.load(weights_only=True, map_location="cpu")` only.

JSON and JSONL go through `methods.core.results.read_json` / `read_jsonl`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from .results import InputError

__all__ = ["load_npz", "load_parquet", "load_pt", "load_safetensors", "load_weights", "safetensors_keys",
           "safetensors_tensor"]


def _checked(path: str | os.PathLike, kind: str) -> Path:
    """`path` as a Path if it is a non-empty regular file; otherwise one-line InputError."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"missing {kind} file: {p}")
    if not p.is_file():
        raise InputError(f"not a file ({kind} expected): {p}")
    if p.stat().st_size == 0:
        raise InputError(f"empty {kind} file: {p}")
    return p


def _reason(e: BaseException) -> str:
    """The exception's type and the informative part of its message, on one bounded line."""
    text = " ".join(str(e).split())
    # torch's weights_only failure opens with a paragraph of advice; the cause follows this marker
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1].split(" Check the documentation", 1)[0].strip()
    elif "pickled (object) data" in text:  # numpy on a file that is neither zip nor .npy
        text = "neither a zip archive nor a .npy array (pickles are never loaded)"
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _corrupt(p: Path, kind: str, e: BaseException) -> InputError:
    import zipfile

    if isinstance(e, PermissionError):
        return InputError(f"cannot read {kind} file {p}: {_reason(e)}")
    try:
        with open(p, "rb") as f:
            head = f.read(4)
        truncated_zip = head == b"PK\x03\x04" and not zipfile.is_zipfile(p)  # npz and torch files are zips
    except OSError:
        truncated_zip = False
    problem = "truncated: a zip archive without its central directory" if truncated_zip else "truncated or corrupt"
    return InputError(f"unreadable {kind} file {p} ({problem}): {_reason(e)}")


def _require(p: Path, kind: str, have: Iterable[str], keys: Iterable[str] | None) -> None:
    if keys is None:
        return
    have = set(have)
    missing = [k for k in keys if k not in have]
    if missing:
        shown = ", ".join(sorted(map(str, have))[:8]) + (", ..." if len(have) > 8 else "")
        raise InputError(f"{kind} file {p} has no key {missing[0]!r} (keys: {shown or 'none'})")


def load_npz(path: str | os.PathLike, keys: Iterable[str] | None = None) -> dict:
    """Every array of an `.npz` archive as {name: ndarray}, read eagerly (so a bad CRC or a
    truncated member fails here, not at first use); `keys`: names that must be present."""
    import numpy as np

    p = _checked(path, "npz")
    try:
        z = np.load(p, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise InputError(f"not an npz archive (a single .npy array): {p}")
        with z:
            _require(p, "npz", z.files, keys)
            return {k: z[k] for k in z.files}
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (zipfile, zlib, EOFError, ValueError, OSError...: all one line)
        raise _corrupt(p, "npz", e) from None


def load_pt(path: str | os.PathLike, keys: Iterable[str] | None = None) -> Any:
    """`torch.load(path, weights_only=True, map_location="cpu")`; `keys`: the object must be a dict
    holding these keys (`()`: any dict)."""
    import torch

    p = _checked(path, "torch")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (RuntimeError, UnpicklingError, EOFError, KeyError, OSError...)
        raise _corrupt(p, "torch", e) from None
    if keys is not None:
        if not isinstance(obj, dict):
            raise InputError(f"torch file {p} holds a {type(obj).__name__}, not a dict")
        _require(p, "torch", obj.keys(), keys)
    return obj


def load_safetensors(path: str | os.PathLike, keys: Iterable[str] | None = None, metadata: bool = False):
    """{name: tensor} of a safetensors file (on CPU), or ({name: tensor}, {str: str} header
    metadata) when `metadata`; `keys`: tensor names that must be present."""
    from safetensors import safe_open

    p = _checked(path, "safetensors")
    try:
        with safe_open(str(p), framework="pt") as f:
            _require(p, "safetensors", f.keys(), keys)
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (SafetensorError, OSError, ...)
        raise _corrupt(p, "safetensors", e) from None
    return (tensors, meta) if metadata else tensors


def safetensors_keys(path: str | os.PathLike) -> list[str]:
    """The tensor names of a safetensors file (its header only; the file is checked to cover it)."""
    from safetensors import safe_open

    p = _checked(path, "safetensors")
    try:
        with safe_open(str(p), framework="pt") as f:
            return list(f.keys())
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _corrupt(p, "safetensors", e) from None


def safetensors_tensor(path: str | os.PathLike, name: str):
    """One tensor of a safetensors file (CPU), read without loading the others."""
    from safetensors import safe_open

    p = _checked(path, "safetensors")
    try:
        with safe_open(str(p), framework="pt") as f:
            _require(p, "safetensors", f.keys(), [name])
            return f.get_tensor(name)
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _corrupt(p, "safetensors", e) from None


def load_parquet(path: str | os.PathLike, columns: Iterable[str] | None = None):
    """A Parquet table as a pandas DataFrame; `columns`: names that must be present."""
    import pandas as pd

    p = _checked(path, "parquet")
    try:
        df = pd.read_parquet(p)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (pyarrow's ArrowInvalid, OSError, ...)
        raise _corrupt(p, "parquet", e) from None
    _require(p, "parquet", df.columns, columns)
    return df


def load_weights(module, state: Any, path: str | os.PathLike) -> None:
    """`module.load_state_dict(state)` (strict) for weights read from `path`; weights that do not
    fit the module (missing or unexpected tensor names, other shapes, not a mapping) are a
    one-line InputError naming the file, not torch's multi-line RuntimeError."""
    if not isinstance(state, dict):
        raise InputError(f"weights in {path}: expected a mapping of tensor names to tensors, got {type(state).__name__}")
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]

    def shown(keys):
        return ", ".join(map(str, keys[:3])) + (f" (+{len(keys) - 3} more)" if len(keys) > 3 else "")

    if missing or unexpected:
        parts = ([f"missing {shown(missing)}"] if missing else []) + ([f"unexpected {shown(unexpected)}"] if unexpected else [])
        raise InputError(f"weights in {path} do not fit the model: {'; '.join(parts)}")
    for k, v in own.items():
        got = getattr(state[k], "shape", None)
        if got is None or tuple(got) != tuple(v.shape):
            raise InputError(f"weights in {path}: tensor {k!r} has shape {None if got is None else tuple(got)}, "
                             f"the model's is {tuple(v.shape)}")
    module.load_state_dict(state)
