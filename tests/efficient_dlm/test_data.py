"""Generated tasks: every answer is the exact function of its prompt, eval prompts are held out,
bad task keys fail naming the key; claim C4a uses tokens through the answer's newline."""
import json
import random
import re

import pytest

from methods.core.config import from_dict
from methods.core.results import InputError
from methods.efficient_dlm.analysis import claim_metrics
from methods.efficient_dlm.config import AnalysisConfig, DataConfig
from methods.efficient_dlm.run import LETTERS, build_data, task_line

# a data section (the values these tests were written with); each test overrides what it varies
DATA = {"corpus": None, "n_train_docs": 20000, "n_eval": 300, "tasks": ["add", "rev"], "mix": [1.0, 1.0, 1.0],
        "max_digits": 3, "fixed_format": False, "rev_min": 6, "rev_max": 16, "rev_chars": LETTERS, "seed": 0}


def test_task_answers_are_exact():
    cfg = DataConfig(**{**DATA, "tasks": ["copy", "add", "rev"], "mix": [1, 1, 1, 0], "max_digits": 2,
                        "fixed_format": True, "rev_min": 7, "rev_max": 7, "rev_chars": "0123456789"})
    rng = random.Random(3)
    for _ in range(200):
        p, a = task_line("add", rng, cfg)
        x, y = p[:-1].split("+")
        assert len(x) == len(y) == 2 and len(a) == 3 and int(a) == int(x) + int(y)
        p, a = task_line("copy", rng, cfg)
        assert p == f"copy {a} = " and len(a) == 7 and a.isdigit()
        p, a = task_line("rev", rng, cfg)
        assert p == f"rev {a[::-1]} = "
    free = DataConfig(**{**DATA, "max_digits": 2})
    p, a = task_line("add", random.Random(0), free)
    assert int(a) == sum(int(v) for v in p[:-1].split("+")) and a == str(int(a))   # unpadded


def test_eval_prompts_are_held_out(tmp_path):
    cfg = DataConfig(**{**DATA, "n_train_docs": 3000, "n_eval": 40, "tasks": ["copy", "add"], "mix": [0.5, 0.4, 0.1],
                        "max_digits": 2, "fixed_format": True, "rev_min": 3, "rev_max": 3, "rev_chars": "0123456789"})
    info = build_data(cfg, str(tmp_path))
    assert info["eval"] == 80
    train = set((tmp_path / "train.txt").read_text().splitlines())
    rows = [json.loads(x) for x in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [r["task"] for r in rows] == ["copy"] * 40 + ["add"] * 40
    assert not any(r["prompt"] + r["answer"] in train for r in rows)


@pytest.mark.parametrize("kw,key", [({"tasks": ["add", "sort"]}, "data.tasks[1]"), ({"mix": [1.0, 1.0]}, "data.mix"),
                                     ({"mix": [0.0, 0.0, 1.0]}, "data.mix"), ({"rev_min": 17}, "data.rev_min"),
                                     ({"rev_chars": "ab="}, "data.rev_chars")])
def test_bad_data_key_is_named(tmp_path, kw, key):
    with pytest.raises(InputError, match=re.escape(f"'{key}'")):
        build_data(from_dict(DataConfig, {**DATA, **kw}, "data"), str(tmp_path))


def test_c4_counts_tokens_through_newline():
    rows = [{"model": "blk_clean", "threshold": th, "acc": acc, "tpf": 4.0, "useful_tpf": u}
            for th, acc, u in ((0.99, 0.9, 1.0), (0.7, 0.85, 2.5))]
    m, _ = claim_metrics(rows, {}, AnalysisConfig(claim_threshold=0.9, fast_threshold=0.5, mid_threshold=0.7,
                                                  slow_threshold=0.99))
    assert m["c4_tpf_mid"] == 2.5 and m["c4_acc_loss_pp"] == pytest.approx(5.0, abs=1e-9)
