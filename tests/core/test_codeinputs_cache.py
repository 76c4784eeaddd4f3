"""The code-input answers kept across Snakemake invocations (`codeinputs.cached_step`): a second
process reads them without parsing; any change to a source file (content, a new file) makes the
next invocation compute them again; a damaged cache file is ignored."""
from __future__ import annotations

import json
import os

import pytest

from methods.core import codeinputs

TREE = {
    "methods/__init__.py": "",
    "methods/core/__init__.py": "",
    "methods/core/cli.py": "",
    "methods/p/__init__.py": "",
    "methods/p/a.py": "",
    "methods/p/b.py": "",
    "methods/p/__main__.py": (
        "from methods.core import cli\n"
        "def _go(a):\n    from . import a\n"
        "def build_parser():\n    p, sub = cli.subcommands('p', 'd')\n    cli.config_step(sub, 'go', _go, 'h')\n"),
}


def _fresh_process(monkeypatch):
    """What a new Snakemake invocation starts with: no in-process caches."""
    monkeypatch.setattr(codeinputs, "_CACHES", {})
    monkeypatch.setattr(codeinputs, "_INDEXES", {})
    monkeypatch.setattr(codeinputs.atexit, "register", lambda *a: None)


@pytest.fixture
def tree(tmp_path):
    for f, text in TREE.items():
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(text)
    return tmp_path


def _run(root, monkeypatch, entry="p", sub="go"):
    _fresh_process(monkeypatch)
    out = codeinputs.cached_step(entry, sub, root)
    codeinputs._save(codeinputs._CACHES[str(root.resolve())])
    return out


def test_second_invocation_reads_the_cache_and_an_edit_invalidates_it(tree, monkeypatch):
    files, found = _run(tree, monkeypatch)
    assert found and files == codeinputs.CodeIndex(tree).step_files("p", "go")
    assert "methods/p/a.py" in files and "methods/p/b.py" not in files
    cached = json.loads((tree / codeinputs.CACHE_FILE).read_text())
    assert cached["steps"]["p go"] == {"files": files, "resolves": True}

    # a new invocation on the same tree: the answer comes from the file, nothing is parsed
    def no_parse(*a, **k):
        raise AssertionError("parsed although the cache is current")

    monkeypatch.setattr(codeinputs.CodeIndex, "step_files", no_parse)
    assert _run(tree, monkeypatch) == (files, True)
    monkeypatch.undo()

    # the step now imports b too: the stamp changes, the next invocation recomputes
    main = tree / "methods/p/__main__.py"
    main.write_text(main.read_text().replace("from . import a", "from . import a, b"))
    os.utime(main, ns=(main.stat().st_atime_ns, main.stat().st_mtime_ns + 10**9))
    files2, _ = _run(tree, monkeypatch)
    assert "methods/p/b.py" in files2


def test_a_new_file_and_an_unknown_sub_command(tree, monkeypatch):
    files, _ = _run(tree, monkeypatch)
    (tree / "methods/p/c.py").write_text("")
    # a new module changes the stamp (the answers could depend on which files exist)
    stamp = json.loads((tree / codeinputs.CACHE_FILE).read_text())["stamp"]
    assert codeinputs._tree_stamp(tree) != stamp
    files_zzz, found = _run(tree, monkeypatch, sub="zzz")
    assert not found and set(files_zzz) >= set(files)


def test_damaged_cache_file_is_ignored(tree, monkeypatch):
    (tree / ".snakemake").mkdir()
    (tree / codeinputs.CACHE_FILE).write_text('{"stamp": ')
    files, found = _run(tree, monkeypatch)
    assert found and files == codeinputs.CodeIndex(tree).step_files("p", "go")
    json.loads((tree / codeinputs.CACHE_FILE).read_text())  # rewritten whole
