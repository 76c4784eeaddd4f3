"""The rendered HTML report in headless Chromium (Debian package `chromium`; `make test` installs
it): at a 1400 px wide window the figures fill the content width (≥ 900 px), nothing overflows
horizontally, and a click on a figure shows it at its own pixel size.

Widths need a layout engine: a copy of the report gets a small inline script that writes the
measurements into the DOM, and `chromium --dump-dom` returns that DOM. Without chromium the test
skips, except in CI (CI=true), where a missing browser is a failure.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess

import pytest

from methods.core import plots
from methods.core.report import build_report
from tests.core.test_report import HEADER, bench_row, claim, write_paper

WIDTH = 1400
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

MEASURE = """<script>
window.addEventListener('load', () => {
  const root = document.documentElement;
  const imgs = [...document.querySelectorAll('figure img')];
  const out = {viewport: root.clientWidth, scroll: root.scrollWidth,
               imgs: imgs.map(i => i.getBoundingClientRect().width),
               natural: imgs.map(i => i.naturalWidth),
               right: Math.max(...[...document.querySelectorAll('table, figure, p, h2')]
                               .map(e => e.getBoundingClientRect().right))};
  const box = document.querySelector('input.zoom');
  box.checked = true;  // what a click on the first figure's label does
  const img = imgs[0], label = img.closest('label');
  out.zoomed = {width: img.getBoundingClientRect().width, position: getComputedStyle(label).position};
  document.body.setAttribute('data-measure', JSON.stringify(out));
});
</script>"""


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"no headless browser ({', '.join(BROWSERS)}) in CI: `make test` installs the "
                    "Debian package chromium")
    pytest.skip("chromium not installed (Debian: apt-get install chromium); required when CI=true")


def png_width(path) -> int:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">I", head[16:20])[0]


def make_figure(path, width_in):
    fig, ax = plots.figure(1, 1, figsize=(width_in, 3.0))
    ax.plot([0, 1, 2], [0, 1, 4])
    plots.save(fig, path, "A test figure.")


@pytest.fixture
def report_html(tmp_path):
    """Two papers like the tiny run: figures of 616 and 990 px (the report's smallest and a
    typical two-panel one), long notes with unbreakable words, benchmark files."""
    long_note = "guard failed: " + "asag_answer_differs_vs_vanilla_" * 6 + " = 0.04; " + "word " * 80
    a = write_paper(tmp_path, "paper_a", [claim("A1", "reproduced", measured=0.123456789, note=long_note),
                                          claim("A2", "inconclusive", kind="mechanism", note="{'RED': 105}")])
    make_figure(a / "figures" / "small.png", 5.6)   # 616 px at 110 dpi
    make_figure(a / "figures" / "wide.png", 9.0)    # 990 px
    (a / "benchmarks" / "train.tsv").write_text(HEADER + bench_row(10.5, 100.0))
    b = write_paper(tmp_path, "paper_b", [claim("B1", "not_reproduced", statement="x" * 300)])
    for d in (a, b):  # titles as long as the real ones
        data = json.loads((d / "claims.json").read_text())
        data["title"] = ("DIBJudge: Mitigating Translationese Bias in Multilingual LLM-as-a-Judge via "
                         "Disentangled Information Bottleneck (Zhang et al.; arXiv 2603.10351)")
        (d / "claims.json").write_text(json.dumps(data))
    make_figure(b / "figures" / "curve.png", 6.4)
    out = tmp_path / "index.html"
    out.write_text(build_report("tiny", [a, b]))
    return out


def run_browser(args, timeout=120):
    cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--window-size={WIDTH},1000", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_figures_fill_width_and_nothing_overflows(report_html, tmp_path):
    measured = tmp_path / "measured.html"
    measured.write_text(report_html.read_text().replace("</body>", MEASURE + "</body>"))
    dom = run_browser(["--virtual-time-budget=5000", "--dump-dom", measured.as_uri()])
    m = re.search(r'data-measure="([^"]*)"', dom)
    assert m, "the measuring script did not run"
    data = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(data["imgs"]) == 3 and sorted(data["natural"]) == [616, 704, 990]
    assert data["viewport"] == WIDTH  # scrollbars hidden: the window's width
    # every figure at the content width (70em = 1120 px less padding), whatever its own size
    assert all(w >= 900 for w in data["imgs"]), data["imgs"]
    assert max(data["imgs"]) - min(data["imgs"]) < 1
    # no horizontal overflow: the page is no wider than the window, no block ends beyond it
    assert data["scroll"] <= data["viewport"], data
    assert data["right"] <= data["viewport"], data
    # click-to-enlarge: the figure in a fixed overlay at its own pixel size
    assert data["zoomed"]["position"] == "fixed"
    assert abs(data["zoomed"]["width"] - data["natural"][0]) < 1, data


def test_screenshot(report_html, tmp_path):
    shot = tmp_path / "report.png"
    run_browser([f"--screenshot={shot}", report_html.as_uri()])
    assert png_width(shot) == WIDTH
