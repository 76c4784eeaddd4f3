"""Cross-field config rules (`check`, methods/core/config.py) and the one-line YAML loader."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from methods.core.config import from_dict, key_error, load_yaml
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig


@dataclass
class Inner:
    lo: int
    hi: int

    def check(self) -> None:
        if self.lo > self.hi:
            raise key_error("lo", f"{self.lo} is above hi={self.hi}")


@dataclass
class Outer:
    inner: Inner
    items: list[Inner]


def test_check_runs_in_from_dict_and_names_the_key_path():
    assert from_dict(Inner, {"lo": 1, "hi": 2}) == Inner(1, 2)
    with pytest.raises(InputError, match=r"^config key 'lo': 3 is above hi=2$"):
        from_dict(Inner, {"lo": 3, "hi": 2})
    with pytest.raises(InputError, match=r"^config key 'sec.inner.lo': 3 is above hi=2$"):
        from_dict(Outer, {"inner": {"lo": 3, "hi": 2}, "items": []}, "sec")
    with pytest.raises(InputError, match=r"^config key 'items\[1\].lo': 5 is above hi=4$"):
        from_dict(Outer, {"inner": {"lo": 0, "hi": 0}, "items": [{"lo": 0, "hi": 1}, {"lo": 5, "hi": 4}]})
    Inner(3, 2)  # a direct construction does not run `check` (the caller decides)


@pytest.mark.parametrize("data,key", [
    ({"warmup_steps": 11}, "train.warmup_steps"),
    ({"eval_every": 11}, "train.eval_every"),
    ({"ckpt_every": 12}, "train.ckpt_every"),
])
def test_train_config_rules(data, key):
    base = {"steps": 10, "batch_size": 2, "lr": 1e-3}
    with pytest.raises(InputError, match=f"^config key '{key}': 1[12] "):
        from_dict(TrainConfig, {**base, **data}, "train")
    # at the limit, and log_every past the end (the last step is always logged), are fine
    from_dict(TrainConfig, {**base, "warmup_steps": 10, "eval_every": 10, "ckpt_every": 10, "log_every": 50})


def test_train_checks_a_config_built_in_code():
    from methods.core.train import train

    cfg = TrainConfig(steps=4, batch_size=1, lr=1e-3, eval_every=5)
    with pytest.raises(InputError, match="config key 'eval_every': 5 is more than steps=4"):
        train(None, lambda s: {}, cfg)


@pytest.mark.parametrize("data,msg", [
    ({"d_model": 64, "n_heads": 6}, "config key 'model.n_heads': 6 heads do not divide d_model=64"),
    ({"d_model": 64, "n_heads": 4, "n_kv_heads": 3}, "config key 'model.n_kv_heads': 3 key/value heads do not divide n_heads=4"),
])
def test_model_config_rules(data, msg):
    with pytest.raises(InputError) as e:
        from_dict(ModelConfig, data, "model")
    assert str(e.value) == msg
    assert from_dict(ModelConfig, {"d_model": 64, "n_heads": 8, "n_kv_heads": 2}).n_kv_heads == 2


@pytest.mark.parametrize("text,line,problem", [
    ("scale: smoke\npapers: [lfq\nresults_dir: r\n", 3, "expected ',' or ']', but got ':'"),
    ("a: 1\n b: 2\n", 2, "mapping values are not allowed here"),
    ("a:\n\t- 1\n", 2, "found character '\\t' that cannot start any token"),
    ('a: "open\n', 2, "found unexpected end of stream"),
])
def test_load_yaml_names_file_and_line(tmp_path, text, line, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_yaml(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:{line}: {problem}") and "\n" not in msg, msg


def test_load_yaml_reads_good_and_missing_files(tmp_path):
    (tmp_path / "ok.yaml").write_text("a: [1, 2]\n")
    assert load_yaml(tmp_path / "ok.yaml") == {"a": [1, 2]}
    with pytest.raises(InputError, match="nope.yaml: cannot read config file"):
        load_yaml(tmp_path / "nope.yaml")
