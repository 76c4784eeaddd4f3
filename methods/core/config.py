"""Typed step configs: a dict from the workflow becomes a dataclass, or a one-line error
that names the offending key."""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, TypeVar

from .results import InputError

T = TypeVar("T")


def _check(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            try:
                return _check(value, arm, where)
            except InputError:
                pass
        raise InputError(f"config key '{where}': {value!r} is not of type {tp}")
    if tp is type(None):
        if value is None:
            return None
        raise InputError(f"config key '{where}': expected null, got {value!r}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"config key '{where}': expected a list, got {value!r}")
        (arm, *_) = typing.get_args(tp) or (Any,)
        out = [_check(v, arm, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise InputError(f"config key '{where}': expected a mapping, got {value!r}")
        _, arm = typing.get_args(tp) or (Any, Any)
        return {k: _check(v, arm, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
            return value
        raise InputError(f"config key '{where}': expected {tp.__name__}, got {value!r}")
    return value


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass `cls` from `data`, rejecting unknown keys and wrong types by name."""
    if not isinstance(data, dict):
        raise InputError(f"config '{where or cls.__name__}': expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        pre = f"{where}." if where else ""
        raise InputError(f"unknown config key '{pre}{unknown[0]}' (allowed: {', '.join(sorted(names))})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = f"{where}.{f.name}" if where else f.name
        if f.name in data:
            kwargs[f.name] = _check(data[f.name], hints[f.name], key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"missing config key '{key}'")
    return cls(**kwargs)


def from_json(cls: type[T], text: str, where: str = "") -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"config is not valid JSON: {e}") from None
    return from_dict(cls, data, where)
