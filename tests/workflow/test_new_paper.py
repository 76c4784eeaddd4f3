"""A 20th paper touches four places only: its package `methods/<slug>/`, its rules file
`workflow/rules/<slug>.smk`, its sections of `config/scales/{smoke,tiny,paper}.yaml` and its tests
`tests/<slug>/`. In a copy of the repository, the throw-away paper of `paper_template/` is added in
exactly those places; the registry finds it, its own tests pass, and the smoke DAG runs it end to
end (its step, its claims, the report) with the verdict its numbers give."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from methods.core import registry

from .conftest import ROOT, snakemake_env

pytestmark = pytest.mark.workflow

TEMPLATE = Path(__file__).with_name("paper_template")
PLACEHOLDER = "PAPER_SLUG"
PLACEHOLDER_UPPER = "PAPER_UPPER"  # the slug in capitals (rules-file constants)
SLUG = "throwaway"
SCALES = ("smoke", "tiny", "paper")


def copy_repository(dst: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore) in a fresh git
    repository with one commit, so `git status` there shows exactly what a test adds."""
    ls = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                        capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, ls):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the work tree is not copied
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "."], cwd=dst, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dst, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=dst, check=True)
    return dst


def add_paper(repo: Path, slug: str) -> None:
    """Write the template paper into `repo` as `slug`: its package, rules file and tests (the
    placeholders replaced in paths and contents, `.tmpl` dropped from names), and its section
    appended to each scale file."""

    def fill(text: str) -> str:
        return text.replace(PLACEHOLDER_UPPER, slug.upper()).replace(PLACEHOLDER, slug)

    for src in sorted(TEMPLATE.rglob("*")):
        rel = src.relative_to(TEMPLATE)
        if not src.is_file() or "__pycache__" in rel.parts or rel.parts[0] not in ("methods", "workflow", "tests"):
            continue
        dst = repo / fill(str(rel)).removesuffix(".tmpl")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(fill(src.read_text()))
    for scale in SCALES:
        section = fill((TEMPLATE / "scales" / f"{scale}.yaml").read_text())
        with open(repo / "config" / "scales" / f"{scale}.yaml", "a") as f:
            f.write(section)


def changed_paths(repo: Path) -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return {line[3:] for line in out.splitlines()}


def in_the_four_places(path: str, slug: str) -> bool:
    """Its package, its rules (with its optional helpers file), its scale sections, its tests."""
    return (path.startswith((f"methods/{slug}/", f"tests/{slug}/"))
            or path in (f"workflow/rules/{slug}.smk", f"workflow/rules/helpers/{slug}.smk")
            or path in {f"config/scales/{s}.yaml" for s in SCALES})


def test_template_is_complete():
    """The template names every part of a paper (so the end-to-end test below adds a whole one)."""
    pkg = TEMPLATE / "methods" / PLACEHOLDER
    for f in ("__init__.py", "__main__.py", "config.py", "claims.yaml", "README.md", "report.rst"):
        assert (pkg / f).is_file(), f
    assert (TEMPLATE / "workflow" / "rules" / f"{PLACEHOLDER}.smk").is_file()
    assert list((TEMPLATE / "tests" / PLACEHOLDER).glob("test_*.py.tmpl"))
    assert {p.stem for p in (TEMPLATE / "scales").glob("*.yaml")} == set(SCALES)
    assert SLUG not in registry.papers(ROOT)


def test_new_paper_in_four_places_runs_end_to_end(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    before = registry.papers(repo)
    add_paper(repo, SLUG)

    # only the four places changed, each of them
    changed = changed_paths(repo)
    assert changed and all(in_the_four_places(p, SLUG) for p in changed), sorted(changed)
    assert f"workflow/rules/{SLUG}.smk" in changed
    assert {f"config/scales/{s}.yaml" for s in SCALES} <= changed
    assert any(p.startswith(f"methods/{SLUG}/") for p in changed)
    assert any(p.startswith(f"tests/{SLUG}/") for p in changed)

    # the registry finds it, in sorted order among the others
    assert registry.papers(repo) == sorted([*before, SLUG])

    # its own tests pass in the copy
    env = snakemake_env()
    t = subprocess.run([sys.executable, "-m", "pytest", f"tests/{SLUG}", "-q", "-p", "no:cacheprovider"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert t.returncode == 0, t.stdout[-3000:] + t.stderr[-2000:]

    # the smoke DAG of this paper alone: its step, its claims, the report
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--config", "scale=smoke", f"papers=[{SLUG}]",
           f"results_dir={out / 'results'}", f"reports_dir={out / 'reports'}"]
    run = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]

    report = out / "reports" / "smoke" / "index.html"
    claims = json.loads((out / "results" / "smoke" / SLUG / "claims.json").read_text())
    summary = json.loads((out / "results" / "smoke" / SLUG / "summary.json").read_text())
    assert report.is_file() and f'id="{SLUG}"' in report.read_text()

    # the numbers, recomputed here from the smoke section (k = 3, n = 2000, seed 0)
    m = np.random.default_rng(0).random((2000, 3)).max(axis=1)
    mean, se = m.mean(), m.std(ddof=1) / np.sqrt(2000)
    assert summary["mean_max"] == pytest.approx(mean, rel=1e-12)
    assert summary["exact_mean"] == 0.75
    assert summary["z"] == pytest.approx(abs(mean - 0.75) / se, rel=1e-12)
    expected = "reproduced" if abs(mean - 0.75) / se <= 4.0 else "not_reproduced"
    assert [(c["id"], c["verdict"]) for c in claims["claims"]] == [("sanity", expected)]
    assert expected == "reproduced"  # a correct sampler: |z| <= 4 with probability 1 - 6e-5
    assert claims["paper"] == SLUG and claims["scale"] == "smoke"

    # running it wrote nothing outside the four places (outputs go to results_dir/reports_dir)
    assert changed_paths(repo) == changed
