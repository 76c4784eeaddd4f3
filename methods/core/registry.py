"""The registered papers, found from the repository layout (no list to keep by hand).

A paper is registered exactly when it has both halves:

- its package `methods/<slug>/` (a directory with `__init__.py`), and
- its rules file `workflow/rules/<slug>.smk`.

`methods/core/` is the shared library, not a paper; a shared part of it with rules of its own
(the model pool: `methods/core/model_pool/` and `workflow/rules/model_pool.smk`) is a core
part (`core_parts`). `workflow/rules/{common,sizes,report}.smk` are the workflow's own files.
Any other package without its rules file, or rules file without its package, is an error
naming both paths, so a half-added (or half-removed) paper fails before any job runs.

The Snakefile includes the core parts' and the registered papers' rules files from here (in
this order: sorted), and `config/config.yaml`'s `papers: all` means every registered paper, in
this order (the report's order). Torch-free and fast: Snakemake imports it at parse time.
"""
from __future__ import annotations

import re
from pathlib import Path

from .results import InputError

WORKFLOW_RULES = ("common", "sizes", "claims", "report")  # workflow/rules/<name>.smk that are no paper
SLUG = re.compile(r"^[a-z][a-z0-9_]*$")
CONFIG_WHERE = "config/config.yaml or --config"


def _packages(path: Path) -> set[str]:
    """Names of the Python packages directly under `path` (directories with __init__.py)."""
    return {p.parent.name for p in path.glob("*/__init__.py")} if path.is_dir() else set()


def core_parts(root: str | Path = ".") -> list[str]:
    """Sorted names of the shared parts of `methods/core/` that have rules of their own:
    packages `methods/core/<name>/` with a `workflow/rules/<name>.smk` (the model pool)."""
    root = Path(root)
    return sorted(n for n in _packages(root / "methods" / "core")
                  if (root / "workflow" / "rules" / f"{n}.smk").is_file())


def papers(root: str | Path = ".") -> list[str]:
    """Sorted slugs of the registered papers under repository root `root`: packages
    `methods/<slug>/` other than `core` whose `workflow/rules/<slug>.smk` exists. Raises
    InputError (one line) where a package lacks its rules file or a rules file its package."""
    root = Path(root)
    rules_dir = root / "workflow" / "rules"
    pkgs = _packages(root / "methods") - {"core"}
    rules = {p.stem for p in rules_dir.glob("*.smk")} if rules_dir.is_dir() else set()
    rules -= set(WORKFLOW_RULES) | set(core_parts(root))
    for slug in sorted(pkgs - rules):
        raise InputError(f"paper package methods/{slug}/ has no rules file workflow/rules/{slug}.smk "
                         "(add it, or remove the package)")
    for slug in sorted(rules - pkgs):
        raise InputError(f"rules file workflow/rules/{slug}.smk has no paper package methods/{slug}/ "
                         "(a directory with __init__.py)")
    for slug in sorted(pkgs):
        if not SLUG.match(slug):
            raise InputError(f"paper slug '{slug}' (methods/{slug}/) is not lowercase letters, digits "
                             "and underscores starting with a letter")
    return sorted(pkgs)


def check_papers(config_papers, registered: list[str], where: str = CONFIG_WHERE) -> list[str]:
    """The papers a run builds, in report order, from the run config's `papers`: `"all"` = every
    registered paper (registry order), or an explicit list of registered slugs (its order).
    Raises InputError (one line) naming an unknown paper by its key, e.g. `papers.0`."""
    if config_papers == "all":
        return list(registered)
    if isinstance(config_papers, str) or not isinstance(config_papers, (list, tuple)) or not config_papers:
        raise InputError(f"invalid config in {where}: key 'papers': expected 'all' or a non-empty list "
                         f"of papers, got {config_papers!r}")
    known = set(registered)
    for i, p in enumerate(config_papers):
        if p not in known:
            raise InputError(f"invalid config in {where}: key 'papers.{i}': unknown paper {p!r} "
                             f"(registered: {', '.join(registered)})")
    if len(set(config_papers)) != len(config_papers):
        dup = next(p for i, p in enumerate(config_papers) if p in config_papers[:i])
        raise InputError(f"invalid config in {where}: key 'papers': {dup!r} is listed twice")
    return list(config_papers)
