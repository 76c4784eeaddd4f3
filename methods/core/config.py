"""Typed configs: each paper declares its scale-file section once, as dataclasses, and a dict
from the workflow becomes that dataclass or a one-line error naming the offending key.

The declaration is the validation: field types (int, float, str, bool, None, `Literal[...]`,
lists, tuples, `dict[K, V]`, nested dataclasses, unions) and, through
`typing.Annotated[T, Check(...)]`, the JSON-schema keywords a value must satisfy (minimum,
exclusive bounds, list length, uniqueness, string pattern, mapping size). A field without a
default is required; keys a dataclass does not declare are refused. A union of dataclasses that
all declare one `Literal` field (e.g. `backend`) is told apart by that field's value, so an error
names a key of the chosen arm. `Annotated[T, AsMapping(...)]` validates a mapping as T but keeps
it a mapping (specs handed on to an API that takes one, e.g. `methods.core.llm_spec.LLMSpec`). Checks that relate several
fields live in the dataclass's `check(self) -> None`, which raises `key_error(key, problem)`
with `key` relative to the dataclass (e.g. "warmup_steps"): `from_dict` calls it and names the
full key path ("siamesenorm.run.train.warmup_steps"), so the workflow's start-up validation
(`check_scale`, which builds every section) refuses such a file before any job runs. (Older
cross-field checks in a `__post_init__` raise InputError naming the keys themselves.)
`json_schema(cls)` writes the same rules as a draft 2020-12 JSON schema (for editors and
documentation; `python -m methods.core schema`).
"""
from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from .results import InputError

T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """Constraints on a value, named as in JSON schema (draft 2020-12)."""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    pattern: str | None = None           # a string (or a mapping key) must match, re.search
    min_length: int | None = None
    min_properties: int | None = None
    not_in: tuple = ()                   # values refused (JSON schema `not: {enum: [...]}`)
    redact: bool = False                 # an error does not repeat the value (it may be a secret)

    def schema(self) -> dict:
        names = {"minimum": "minimum", "maximum": "maximum", "exclusive_minimum": "exclusiveMinimum",
                 "exclusive_maximum": "exclusiveMaximum", "min_items": "minItems", "max_items": "maxItems",
                 "pattern": "pattern", "min_length": "minLength", "min_properties": "minProperties"}
        out = {js: getattr(self, py) for py, js in names.items() if getattr(self, py) is not None}
        if self.unique_items:
            out["uniqueItems"] = True
        if self.not_in:
            out["not"] = {"enum": list(self.not_in)}
        return out

    def check(self, value: Any, where: str) -> None:
        def fail(what):
            raise InputError(f"config key '{where}': {'the value' if self.redact else repr(value)} {what}")

        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                fail(f"is less than the minimum of {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                fail(f"is greater than the maximum of {self.maximum}")
            if self.exclusive_minimum is not None and value <= self.exclusive_minimum:
                fail(f"must be greater than {self.exclusive_minimum}")
            if self.exclusive_maximum is not None and value >= self.exclusive_maximum:
                fail(f"must be less than {self.exclusive_maximum}")
        if isinstance(value, (list, tuple)):
            if self.min_items is not None and len(value) < self.min_items:
                fail(f"has fewer than {self.min_items} items")
            if self.max_items is not None and len(value) > self.max_items:
                fail(f"has more than {self.max_items} items")
            if self.unique_items and len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
                fail("has repeated items")
        if isinstance(value, str):
            if self.pattern is not None and not re.search(self.pattern, value):
                fail(f"does not match {self.pattern!r}")
            if self.min_length is not None and len(value) < self.min_length:
                fail(f"is shorter than {self.min_length}")
        if isinstance(value, dict) and self.min_properties is not None and len(value) < self.min_properties:
            fail(f"has fewer than {self.min_properties} entries")
        if self.not_in and value in self.not_in:
            fail("is not allowed here")


@dataclass(frozen=True)
class AsMapping:
    """`Annotated[T, AsMapping()]`: the value must be a valid T (a dataclass, or a union of
    dataclasses told apart by a Literal field), but it stays the mapping it was: the keys given,
    their values converted, no defaults filled in (a spec handed on to an API that takes a
    mapping). With a `name`, the JSON schema holds T once, as `$defs[name]`, and refers to it."""
    name: str | None = None


# The constrained scalars every paper uses.
PosInt = Annotated[int, Check(minimum=1)]
NonNegInt = Annotated[int, Check(minimum=0)]
NonNeg = Annotated[float, Check(minimum=0)]
Positive = Annotated[float, Check(exclusive_minimum=0)]
Prob = Annotated[float, Check(minimum=0, maximum=1)]


def _split(tp: Any) -> tuple[Any, list[Check]]:
    """(T, its Checks) of Annotated[T, Check, ...]; (tp, []) otherwise."""
    if typing.get_origin(tp) is Annotated:
        base, *meta = typing.get_args(tp)
        return base, [m for m in meta if isinstance(m, Check)]
    return tp, []


def _as_mapping(tp: Any) -> AsMapping | None:
    if typing.get_origin(tp) is Annotated:
        return next((m for m in typing.get_args(tp)[1:] if isinstance(m, AsMapping)), None)
    return None


def _leaves(tp: Any) -> list:
    """The arms of a (nested, possibly Annotated) union, flattened."""
    base, _ = _split(tp)
    if typing.get_origin(base) in (typing.Union, types.UnionType):
        return [leaf for a in typing.get_args(base) for leaf in _leaves(a)]
    return [base]


def _literal_field(cls: Any, name: str) -> tuple | None:
    """The values of `cls`'s field `name` where it is declared `Literal[...]`, else None."""
    if not (dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}):
        return None
    tp, _ = _split(typing.get_type_hints(cls, include_extras=True)[name])
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else None


def _tagged_arm(value: Any, arms: tuple, where: str) -> Any:
    """The dataclass of a union of dataclasses that `value` (a mapping) names by the union's tag:
    the first field every arm declares as a Literal. None where the union is not such a union.
    The tag missing or naming no arm is a one-line error about the tag alone (the other keys,
    which may hold anything, are not repeated)."""
    leaves = _leaves(typing.Union[arms])
    if len(leaves) < 2 or not all(dataclasses.is_dataclass(c) for c in leaves):
        return None
    if not isinstance(value, dict):
        raise InputError(f"config key '{where}': expected a mapping, got {value!r}")
    tag = next((f.name for f in dataclasses.fields(leaves[0])
                if all(_literal_field(c, f.name) is not None for c in leaves)), None)
    if tag is None:
        return None
    if tag not in value:
        raise InputError(f"missing config key '{where}.{tag}'")
    allowed = []
    for c in leaves:
        opts = _literal_field(c, tag)
        if any(o == value[tag] and type(o) is type(value[tag]) for o in opts):
            return c
        allowed += [o for o in opts if o not in allowed]
    raise InputError(f"config key '{where}.{tag}': {value[tag]!r} is not one of {allowed}")


def _check(value: Any, tp: Any, where: str) -> Any:
    keep = _as_mapping(tp)
    tp, checks = _split(tp)
    out = _convert(value, tp, where)
    if keep is not None and isinstance(value, dict) and dataclasses.is_dataclass(out):
        out = {k: getattr(out, k) for k in value}
    for c in checks:
        c.check(out, where)
    return out


def _convert_union(value: Any, tp: Any, where: str) -> Any:
    arms = typing.get_args(tp)
    if value is not None and type(None) in arms and len(arms) == 2:
        # `X | None` with a value: X's own error (a nested key, a bound), not "wrong type"
        return _check(value, next(a for a in arms if a is not type(None)), where)
    tagged = _tagged_arm(value, arms, where)
    if tagged is not None:  # dataclasses told apart by a Literal field: the chosen one's own error
        return _check(value, tagged, where)
    for arm in arms:
        try:
            return _check(value, arm, where)
        except InputError:
            pass
    raise InputError(f"config key '{where}': {value!r} is not of type {_name(tp)}")


def _convert(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return _convert_union(value, tp, where)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value in allowed and not (isinstance(value, bool) and not any(a is value for a in allowed)):
            return value
        raise InputError(f"config key '{where}': {value!r} is not one of {list(allowed)}")
    if tp is type(None):
        if value is None:
            return None
        raise InputError(f"config key '{where}': expected null, got {value!r}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"config key '{where}': expected a list, got {value!r}")
        args = typing.get_args(tp) or (Any,)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise InputError(f"config key '{where}': expected {len(args)} items, got {value!r}")
            return tuple(_check(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        out = [_check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise InputError(f"config key '{where}': expected a mapping, got {value!r}")
        karm, varm = typing.get_args(tp) or (Any, Any)
        return {_check(k, karm, f"{where}.{k}"): _check(v, varm, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
            return value
        raise InputError(f"config key '{where}': expected {tp.__name__}, got {value!r}")
    return value


def _name(tp: Any) -> str:
    tp, _ = _split(tp)
    if dataclasses.is_dataclass(tp):
        return tp.__name__
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " | ".join(_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


class ConfigKeyError(InputError):
    """A value that breaks a rule relating several fields: `key` is the dotted key path (relative
    to the dataclass whose `check` raised it, until `from_dict` prefixes where that sits)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"config key '{key}': {problem}")
        self.key, self.problem = key, problem


def key_error(key: str, problem: str) -> ConfigKeyError:
    """The error a dataclass's `check` raises for its field `key` (dotted for a nested one)."""
    return ConfigKeyError(key, problem)


def run_check(obj: Any, where: str = "") -> None:
    """Call `obj.check()` where the dataclass defines one; its `key_error` then names the key
    under `where` (the dotted path of `obj` in the scale file)."""
    check = getattr(type(obj), "check", None)
    if not callable(check):
        return
    try:
        check(obj)
    except ConfigKeyError as e:
        if not where:
            raise
        raise ConfigKeyError(f"{where}.{e.key}", e.problem) from None


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass `cls` from `data`, rejecting unknown keys, wrong types and values that
    break a Check, by name; then run its cross-field `check` (see `run_check`)."""
    if not isinstance(data, dict):
        raise InputError(f"config '{where or cls.__name__}': expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls, include_extras=True)
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
    obj = cls(**kwargs)
    run_check(obj, where)
    return obj


def from_json(cls: type[T], text: str, where: str = "") -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"config is not valid JSON: {e}") from None
    return from_dict(cls, data, where)


def load_yaml(path: str | Path) -> Any:
    """The YAML (or JSON) file at `path`; a missing file, or one that does not parse, is a one-line
    InputError `<path>:<line>: <problem>` (the line of the error, 1-based)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read config file: {getattr(e, 'strerror', None) or e}") from None
    try:  # libyaml's safe loader where PyYAML has it (same documents, ~10x faster) ...
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        pass
    try:  # ... and on an error the pure-Python one, whose messages name the bad character
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = " ".join((e.problem or "invalid YAML").split())
        if mark is not None:
            problem += f" (column {mark.column + 1}"
            if e.context:
                ctx = e.context_mark
                problem += f", {e.context}" + (f" from line {ctx.line + 1}" if ctx is not None and ctx.line != mark.line else "")
            problem += ")"
        raise InputError(f"{where}: {problem}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{path}: {' '.join(str(e).split())}") from None


def json_schema(tp: Any, defs: dict | None = None) -> dict:
    """The JSON schema (draft 2020-12) of a config type: the same keys, types and Checks that
    `from_dict` enforces (not the cross-field `check`s and `__post_init__`s). Nested dataclasses go to
    `$defs` once each."""
    top = defs is None
    defs = {} if top else defs
    base, checks = _split(tp)
    origin = typing.get_origin(base)
    mark = _as_mapping(tp)
    if mark is not None and mark.name is not None:
        if mark.name not in defs:
            defs[mark.name] = {}  # placeholder: recursion-safe
            defs[mark.name] = json_schema(base, defs)
        out = {"$ref": f"#/$defs/{mark.name}"}
    elif base is Any:
        out: dict = {}
    elif dataclasses.is_dataclass(base):
        name = base.__name__ if base.__module__ == "methods.core.config" else f"{base.__module__}.{base.__name__}"
        if name not in defs:
            defs[name] = {}  # placeholder: recursion-safe
            hints = typing.get_type_hints(base, include_extras=True)
            fields = dataclasses.fields(base)
            node = {"type": "object", "additionalProperties": False,
                    "properties": {f.name: json_schema(hints[f.name], defs) for f in fields}}
            required = [f.name for f in fields
                        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            if required:
                node["required"] = required
            if base.__doc__ and not base.__doc__.startswith(f"{base.__name__}("):
                node["description"] = " ".join(base.__doc__.split())
            defs[name] = node
        out = {"$ref": f"#/$defs/{name}"}
    elif origin in (typing.Union, types.UnionType):
        out = {"anyOf": [json_schema(a, defs) for a in typing.get_args(base)]}
    elif origin is Literal:
        out = {"enum": list(typing.get_args(base))}
    elif base is type(None):
        out = {"type": "null"}
    elif origin in (list, tuple):
        args = typing.get_args(base) or (Any,)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            out = {"type": "array", "prefixItems": [json_schema(a, defs) for a in args],
                   "minItems": len(args), "maxItems": len(args)}
        else:
            out = {"type": "array", "items": json_schema(args[0], defs)}
    elif origin is dict:
        karm, varm = typing.get_args(base) or (Any, Any)
        out = {"type": "object", "additionalProperties": json_schema(varm, defs)}
        kbase, kchecks = _split(karm)
        knode = {k: v for c in kchecks for k, v in c.schema().items()}
        if typing.get_origin(kbase) is Literal:
            knode["enum"] = list(typing.get_args(kbase))
        if knode:
            out["propertyNames"] = knode
    else:
        out = {"type": {int: "integer", float: "number", str: "string", bool: "boolean"}.get(base, "string")}
    for c in checks:
        out.update(c.schema())
    if top:
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **out, "$defs": defs}
    return out


_REPO = Path(__file__).resolve().parents[2]  # the repository this module belongs to


def section_class(name: str, root: str | Path = ".") -> type:
    """The dataclass that declares scale-file section `name`: `Config` of
    `methods/<name>/config.py` (a paper) or `methods/core/<name>/config.py` (a shared part such
    as the model pool). The file is loaded by path, without running its package's
    `__init__.py` (which may import torch), so the workflow can validate at parse time."""
    import importlib.util
    import sys

    root = Path(root)
    for rel, mod in ((f"methods/{name}/config.py", f"methods.{name}.config"),
                     (f"methods/core/{name}/config.py", f"methods.core.{name}.config")):
        path = root / rel
        if path.is_file():
            if root.resolve() != _REPO:  # another tree (a test's copy): a private module name
                mod = f"_scale_config_{abs(hash(str(path.resolve())))}"
            if mod not in sys.modules:
                spec = importlib.util.spec_from_file_location(mod, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[mod] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[mod]
                    raise
            cls = getattr(sys.modules[mod], "Config", None)
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
                raise InputError(f"{rel} defines no dataclass named Config")
            return cls
    raise InputError(f"no config declared for section '{name}': expected methods/{name}/config.py "
                     "with a dataclass Config")


def scale_sections(papers: list[str]) -> dict[str, str]:
    """Every section of a scale file, in file order: the runtime, the shared parts of core that
    have a config (the model pool), then one per registered paper."""
    return {"runtime": "runtime", "model_pool": "model_pool", **{p: p for p in papers}}


def check_scale(data: Any, papers: list[str], where: str, root: str | Path = ".") -> dict:
    """Validate a whole scale file (config/scales/<scale>.yaml): every section present, no
    other key, each section valid against its dataclass. Returns {section: dataclass}; raises
    InputError naming the file and the dotted key."""
    from .runtime import RuntimeSpec

    if not isinstance(data, dict):
        raise InputError(f"invalid config in {where}: expected a mapping of sections, got {type(data).__name__}")
    sections = scale_sections(papers)
    unknown = sorted(set(data) - set(sections) - {"looks"})
    if unknown:
        raise InputError(f"invalid config in {where}: unknown section '{unknown[0]}' "
                         f"(sections: {', '.join(sections)})")
    out = {}
    for key in sections:
        if key not in data:
            raise InputError(f"invalid config in {where}: missing section '{key}'")
        cls = RuntimeSpec if key == "runtime" else section_class(key, root)
        try:
            out[key] = from_dict(cls, data[key], key)
        except InputError as e:
            raise InputError(f"invalid config in {where}: {e}") from None
    if "looks" in data:
        out["looks"] = check_looks_section(data["looks"], data, papers, where)
    return out


def check_looks_section(looks: Any, data: dict, papers: list[str], where: str) -> dict:
    """The optional `looks` section: paper → planned looks (seeds after each, methods.core.sequential);
    the paper's `seeds` list must hold the cap."""
    from .sequential import check_looks

    if not isinstance(looks, dict):
        raise InputError(f"invalid config in {where}: 'looks' must map papers to seed counts")
    for paper, plan in looks.items():
        if paper not in papers:
            raise InputError(f"invalid config in {where}: 'looks.{paper}' is not a registered paper")
        try:
            check_looks(plan)
        except ValueError as e:
            raise InputError(f"invalid config in {where}: 'looks.{paper}': {e}") from None
        seeds = data.get(paper, {}).get("seeds") if isinstance(data.get(paper), dict) else None
        if not isinstance(seeds, list) or len(seeds) < plan[-1]:
            raise InputError(f"invalid config in {where}: 'looks.{paper}' caps at {plan[-1]} seeds, "
                             f"'{paper}.seeds' lists {len(seeds) if isinstance(seeds, list) else 'none'}")
    return looks


def scale_schema(papers: list[str], root: str | Path = ".") -> dict:
    """The JSON schema of a whole scale file, generated from the sections' dataclasses (what
    `check_scale` enforces, less the cross-field `check`s and `__post_init__`s)."""
    from .runtime import RuntimeSpec

    defs: dict = {}
    props = {key: json_schema(RuntimeSpec if key == "runtime" else section_class(key, root), defs)
             for key in scale_sections(papers)}
    props["looks"] = {"type": "object", "additionalProperties": False,
                      "description": "optional: paper -> planned looks of its sequential seeds (methods/core/sequential.py)",
                      "properties": {p: {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1}
                                     for p in papers}}
    required = [k for k in props if k != "looks"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "description": "Hyper-parameters of one scale (config/scales/<scale>.yaml), generated from the "
                           "sections' dataclasses: methods/<paper>/config.py, methods/core/runtime.py, "
                           "methods/core/model_pool/config.py.",
            "type": "object", "additionalProperties": False, "required": required, "properties": props,
            "$defs": defs}
