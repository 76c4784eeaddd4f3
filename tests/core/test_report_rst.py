"""Every caption of `snakemake --report` (methods/<paper>/report.rst, workflow/report/*.rst and
any other file a rule names in `caption=`) renders with docutils without a warning or an error.
Snakemake renders a caption as a Jinja template first (with `snakemake` = the job: wildcards,
params, ...), so the test does the same with stand-in values."""
from __future__ import annotations

import io
import re
from pathlib import Path

import jinja2
import pytest
from docutils.core import publish_string

REPO = Path(__file__).resolve().parents[2]


class Job(dict):
    """`snakemake.wildcards.paper` and the like: any attribute or key, a placeholder string."""

    def __getattr__(self, name):
        return Job(name=name)

    def __getitem__(self, name):
        return Job(name=name)

    def __str__(self):
        return f"<{self.get('name', 'x')}>"


def captions() -> list[Path]:
    found = set(REPO.glob("methods/*/report.rst")) | set(REPO.glob("workflow/report/*.rst"))
    for smk in REPO.glob("workflow/rules/*.smk"):
        for rel in re.findall(r'caption\s*=\s*"([^"]+)"', smk.read_text()):
            found.add((smk.parent / rel).resolve())
    return sorted(found)


def rst_problems(text: str) -> str:
    """docutils' warnings and errors on `text` (Jinja rendered first); '' when clean."""
    src = jinja2.Template(text, undefined=jinja2.StrictUndefined).render(snakemake=Job())
    stream = io.StringIO()
    try:
        publish_string(src, writer="html5",
                       settings_overrides={"warning_stream": stream, "halt_level": 5, "report_level": 2})
    except Exception as e:  # noqa: BLE001 - any docutils failure is a finding
        return f"{stream.getvalue()}{type(e).__name__}: {e}"
    return stream.getvalue()


def test_captions_found():
    names = {p.relative_to(REPO).as_posix() for p in captions()}
    assert "methods/tsgd/report.rst" in names and "workflow/report/claims.rst" in names
    assert all(p.is_file() for p in captions()), [p for p in captions() if not p.is_file()]


@pytest.mark.parametrize("path", captions(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_caption_renders_clean(path):
    assert rst_problems(path.read_text()) == ""


def test_checker_catches_an_undefined_substitution():
    """Negative control: `|L|` (the library size, before it was escaped) is an RST substitution."""
    assert "Undefined substitution referenced" in rst_problems("library size |L| per step")
    assert rst_problems(r"library size \|L\| per step") == ""
    assert rst_problems("Claims of {{ snakemake.wildcards.paper }}.") == ""
