"""Shared scaffolding of the tests/*/test_config.py files: one paper's section of the three scale
files (config/scales/{smoke,tiny,paper}.yaml), its declared section class, the JSON schema generated
from that class under an independent validator (jsonschema, Draft 2020-12), copies of a section with
one value at a dotted path replaced or deleted, and the checks the config tests repeat: a bad value
fails with a one-line InputError naming the key, and the generated schema agrees with `from_dict`."""
from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from methods.core.config import from_dict, json_schema, section_class
from methods.core.results import InputError

ROOT = Path(__file__).resolve().parents[1]
SCALES = ("smoke", "tiny", "paper")
DELETE = ...  # as a new value: delete the key (Ellipsis, so parametrize ids stay the same run to run)


def edited(data: dict, path: str, value=DELETE) -> dict:
    """A copy of `data` with the value at dotted `path` (`a.b[0].c` or `a.b.0.c`) replaced by
    `value`, or deleted when `value` is DELETE. A key indexes a list as an int, a mapping as a str."""
    out = copy.deepcopy(data)
    *head, last = re.findall(r"[^.\[\]]+", path)
    node = out
    for k in head:
        node = node[int(k) if isinstance(node, list) else k]
    last = int(last) if isinstance(node, list) else last
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


def bad_ids(cases) -> list[str]:
    """The parametrize ids of (dotted key, value, message) cases: `key=value`, at most 60 characters."""
    return [f"{p}={v!r}"[:60] for p, v, _ in cases]


def assert_loads_without_torch_or_numpy(name: str) -> None:
    """The section class loads without torch or numpy (the workflow reads it at parse time)."""
    code = ("import sys; from methods.core.config import section_class; section_class(%r); "
            "heavy = {'torch', 'numpy'} & set(sys.modules); assert not heavy, heavy" % name)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


class Cases:
    """One paper's config section: `Config` (the declared class, found by `section_class` unless
    given), `sections` (scale → the section as the scale file has it), `schema` (the validator of
    the JSON schema generated from `Config`)."""

    def __init__(self, name: str, config: type | None = None):
        self.name = name
        self.Config = section_class(name, ROOT) if config is None else config
        self.sections = {s: yaml.safe_load((ROOT / "config" / "scales" / f"{s}.yaml").read_text())[name]
                         for s in SCALES}
        self.schema = jsonschema.Draft202012Validator(json_schema(self.Config))

    def section(self, scale: str) -> dict:
        """A fresh copy of the section of `scale`."""
        return copy.deepcopy(self.sections[scale])

    def loaded(self, scale: str) -> tuple[dict, object]:
        """The section of `scale` (a fresh copy) and its `from_dict` instance; the generated schema
        accepts the section too (jsonschema's ValidationError names what it refuses)."""
        data = self.section(scale)
        self.schema.validate(data)
        return data, from_dict(self.Config, data, self.name)

    def edited(self, path: str, value, scale: str = "tiny") -> dict:
        """The `scale` section with the value at dotted `path` replaced, or deleted (DELETE)."""
        return edited(self.sections[scale], path, value)

    def error(self, data: dict) -> str:
        """The message of the InputError `from_dict` raises on `data` (failing if it raises none)."""
        with pytest.raises(InputError) as e:
            from_dict(self.Config, data, self.name)
        return str(e.value)

    def assert_rejected(self, data: dict, message: str) -> None:
        """`from_dict` refuses `data` in one line containing `message`, and so does the schema."""
        msg = self.error(data)
        assert "\n" not in msg and message in msg, msg
        assert not self.schema.is_valid(data)  # the generated schema refuses it too

    def assert_accepted(self, cases) -> None:
        """Each (dotted path, value) edit of the tiny section passes `from_dict` and the schema."""
        for path, value in cases:
            doc = self.edited(path, value)
            from_dict(self.Config, doc, self.name)
            assert self.schema.is_valid(doc), (path, value)

    def assert_schema_agrees(self, bad) -> None:
        """The generated schema accepts the three scale sections and refuses each (path, value, _) edit."""
        for scale in SCALES:
            assert not list(self.schema.iter_errors(self.sections[scale])), scale
        for path, value, _ in bad:
            assert not self.schema.is_valid(self.edited(path, value)), path
