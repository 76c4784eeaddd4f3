"""The paper registry: a paper is a methods/<slug>/ package with its workflow/rules/<slug>.smk,
found on a temporary repository tree; half-added papers and unknown run-config papers fail with
one line naming them."""
import subprocess
import sys
from pathlib import Path

import pytest

from methods.core import registry
from methods.core.results import InputError

ROOT = Path(__file__).resolve().parents[2]


def make_tree(root: Path, packages=(), rules=(), core_packages=(), plain_dirs=()) -> Path:
    """A repository skeleton: methods/<p>/__init__.py, workflow/rules/<r>.smk, methods/core/<c>/."""
    (root / "methods" / "core").mkdir(parents=True)
    (root / "methods" / "__init__.py").write_text("")
    (root / "methods" / "core" / "__init__.py").write_text("")
    (root / "workflow" / "rules").mkdir(parents=True)
    for name in ("common", "sizes", "claims", "report"):
        (root / "workflow" / "rules" / f"{name}.smk").write_text("")
    for p in packages:
        (root / "methods" / p).mkdir()
        (root / "methods" / p / "__init__.py").write_text("")
    for c in core_packages:
        (root / "methods" / "core" / c).mkdir()
        (root / "methods" / "core" / c / "__init__.py").write_text("")
    for d in plain_dirs:
        (root / "methods" / d).mkdir()
        (root / "methods" / d / "notes.txt").write_text("not a package")
    for r in rules:
        (root / "workflow" / "rules" / f"{r}.smk").write_text("")
    return root


def test_papers_are_the_packages_with_rules_sorted(tmp_path):
    root = make_tree(tmp_path, packages=["zeta", "alpha", "mid_2"], rules=["zeta", "alpha", "mid_2", "pool"],
                     core_packages=["pool", "helpers"], plain_dirs=["__pycache__", "scratch"])
    assert registry.papers(root) == ["alpha", "mid_2", "zeta"]
    # a core sub-package with its own rules file is a core part, not a paper; one without is neither
    assert registry.core_parts(root) == ["pool"]
    assert registry.papers(str(root)) == ["alpha", "mid_2", "zeta"]  # str roots too


def test_empty_tree_has_no_papers(tmp_path):
    assert registry.papers(make_tree(tmp_path)) == [] and registry.core_parts(tmp_path) == []
    assert registry.papers(tmp_path / "nowhere") == []


def test_package_without_rules_is_one_line(tmp_path):
    root = make_tree(tmp_path, packages=["alpha", "beta"], rules=["alpha"])
    with pytest.raises(InputError) as e:
        registry.papers(root)
    msg = str(e.value)
    assert "\n" not in msg and "methods/beta/" in msg and "workflow/rules/beta.smk" in msg


def test_rules_without_package_is_one_line(tmp_path):
    root = make_tree(tmp_path, packages=["alpha"], rules=["alpha", "gamma"], plain_dirs=["gamma"])
    with pytest.raises(InputError) as e:
        registry.papers(root)  # methods/gamma/ exists but has no __init__.py: no package
    msg = str(e.value)
    assert "\n" not in msg and "workflow/rules/gamma.smk" in msg and "methods/gamma/" in msg


def test_bad_slug_is_refused(tmp_path):
    root = make_tree(tmp_path, packages=["Alpha"], rules=["Alpha"])
    with pytest.raises(InputError, match="'Alpha'"):
        registry.papers(root)


def test_check_papers_all_list_and_errors():
    reg = ["a", "b", "c"]
    assert registry.check_papers("all", reg) == ["a", "b", "c"]
    assert registry.check_papers(["c", "a"], reg) == ["c", "a"]  # an explicit list keeps its order
    with pytest.raises(InputError) as e:
        registry.check_papers(["a", "nosuch"], reg)
    msg = str(e.value)
    assert msg == ("invalid config in config/config.yaml or --config: key 'papers.1': unknown paper 'nosuch' "
                   "(registered: a, b, c)")
    for bad in ("a", [], None, 3):
        with pytest.raises(InputError, match="key 'papers': expected 'all'"):
            registry.check_papers(bad, reg)
    with pytest.raises(InputError, match="'b' is listed twice"):
        registry.check_papers(["b", "a", "b"], reg)


def test_repository_registry():
    """The checkout itself: every methods/<slug>/ package but core is a paper with its rules file."""
    pkgs = sorted(p.parent.name for p in (ROOT / "methods").glob("*/__init__.py") if p.parent.name != "core")
    assert registry.papers(ROOT) == pkgs and len(pkgs) >= 19
    for p in pkgs:
        assert (ROOT / "workflow" / "rules" / f"{p}.smk").is_file()
        assert (ROOT / "methods" / p / "claims.yaml").is_file() and (ROOT / "methods" / p / "report.rst").is_file()


def test_registry_is_torch_free():
    """Snakemake imports it at parse time: no torch, numpy or yaml behind it."""
    code = ("import sys; from methods.core import registry; registry.papers('.'); "
            "heavy = [m for m in ('torch', 'numpy', 'yaml') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
