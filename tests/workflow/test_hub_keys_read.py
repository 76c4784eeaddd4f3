"""Every hub key of config/scales/paper.yaml is read by code: a paper-scale key that no code path
reads is a promise the harness does not keep (a researcher sets it and nothing changes).

The hub keys are every key of a `hub:` mapping (at any depth of a paper's section, the mapping's
own name too) and every key named `hub` or `hub_id`. A key counts as read when the paper's own
code (its package under methods/, or for a shared part its package under methods/core/, and its
rules files) accesses it by that name: an attribute `.key`, a subscript `["key"]`, or a
`get("key"` call. A dataclass field declaration (`key: type`) is not an access. Static and
torch-free; the stand-in paper paths (tests/paper_path) then run those code paths."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from methods.core import registry

ROOT = Path(__file__).resolve().parents[2]
HUB_LEAF_NAMES = ("hub", "hub_id")


def hub_keys(section, path: str = "") -> list[tuple[str, str]]:
    """(dotted path, key name) of every hub key in a paper's section of paper.yaml."""
    out = []
    if isinstance(section, dict):
        for key, value in section.items():
            p = f"{path}.{key}" if path else str(key)
            if key in HUB_LEAF_NAMES:
                out.append((p, key))
            if key == "hub" and isinstance(value, dict):
                out += [(f"{p}.{k}", k) for k in value]
            out += hub_keys(value, p)
    elif isinstance(section, list):
        for i, value in enumerate(section):
            out += hub_keys(value, f"{path}[{i}]")
    return list(dict.fromkeys(out))


def code_of(name: str) -> str:
    """The source a paper (or shared part) reads its config in: its package and rules files."""
    pkg = ROOT / "methods" / name
    if not pkg.is_dir():
        pkg = ROOT / "methods" / "core" / name
    files = sorted(pkg.rglob("*.py")) + [ROOT / "workflow" / "rules" / f"{name}.smk",
                                           ROOT / "workflow" / "rules" / "helpers" / f"{name}.smk"]
    return "\n".join(f.read_text() for f in files if f.is_file())


def is_read(key: str, code: str) -> bool:
    k = re.escape(key)
    return re.search(rf"\.{k}\b|\[\s*[\"']{k}[\"']\s*\]|get\(\s*[\"']{k}[\"']", code) is not None


def test_hub_keys_are_found():
    """The walk finds nested `hub:` mappings, their keys, and `hub_id`/`hub` leaves (in lists too)."""
    section = {"train": {"hub_id": None, "hub": {"judge": "a/b", "encoder": "c/d"}},
               "members": [{"name": "x", "hub": "e/f"}], "other": {"model_id": "g/h"}}
    assert hub_keys(section) == [("train.hub_id", "hub_id"), ("train.hub", "hub"), ("train.hub.judge", "judge"),
                                 ("train.hub.encoder", "encoder"), ("members[0].hub", "hub")]


def test_read_means_accessed_not_declared():
    assert is_read("judge", "x = cfg.hub.judge")
    assert is_read("judge", "x = hub['judge']") and is_read("judge", 'hub.get("judge", None)')
    assert not is_read("judge", "class Hub:\n    judge: str | None\n")
    assert not is_read("judge", "x = cfg.judges")


@pytest.mark.parametrize("name", registry.papers(ROOT) + registry.core_parts(ROOT))
def test_every_hub_key_is_read(name):
    paper = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())
    code = code_of(name)
    unread = [p for p, key in hub_keys(paper.get(name) or {}) if not is_read(key, code)]
    assert not unread, f"{name}: hub keys in config/scales/paper.yaml that no code of methods/{name} reads: {unread}"
