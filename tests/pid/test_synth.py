"""The generator builds the dependence structure each task family needs (closed-form checks)."""
import numpy as np
import pytest

from methods.pid.estimators import _mi_xy
from methods.pid.synth import DataConfig, av_items, build, vl_items


def mi(a, b):
    j = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(j, (a, b), 1)
    return _mi_xy(j / j.sum())


def test_family_rules():
    d = vl_items(20000, [1, 1, 1, 1], np.random.default_rng(0))
    img, txt, y, fam = d["img"] - 8 * np.arange(4), d["txt"], d["y"], d["fam"]
    tval = txt[:, 2] - 13
    assert np.all(img[:, 3] == fam)                       # scene marker
    assert np.all(txt[:, 0] == fam)                       # task word
    red, utx, uvi, syn = (fam == k for k in range(4))
    assert np.all(y[red] == img[red, 0] % 4) and np.all(tval[red] == img[red, 0])
    assert np.all(y[utx] == tval[utx] % 4)
    assert np.all(y[uvi] == img[uvi, 1] % 4)
    assert np.all(y[syn] == (img[syn, 2] + tval[syn]) % 4)
    # SYN: each modality's attribute alone carries (almost) no information, the pair 2 bits
    assert mi(img[syn, 2], y[syn]) < 0.01 and mi(tval[syn], y[syn]) < 0.01
    assert mi(img[syn, 2] * 8 + tval[syn], y[syn]) == pytest.approx(2.0, abs=0.01)
    # U_VIS: the text value word is independent of Y
    assert mi(tval[uvi], y[uvi]) < 0.01


def test_av_vision_dominance():
    d = av_items(20000, 0.9, np.random.default_rng(1))
    v = d["img"][:, 0]
    agree = np.mean(d["y"] == v % 4)
    # Y = v on the 90% vision-only items, and by chance (1/4) on the fusion ones
    assert agree == pytest.approx(0.9 + 0.1 * 0.25, abs=0.01)
    t = build(DataConfig(10, 10, 10, 10, 50, 0.9, 0, {}))["av_test"]
    assert t["fusion"].all()
