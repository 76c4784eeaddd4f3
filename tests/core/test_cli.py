"""methods/core/cli.py: a step's config from inline JSON, a YAML/JSON file or @file, `--set`
overrides validated by the step's own config dataclass, `--print-config`, one-line errors, a help
text on every option of every paper's CLI; and the training progress bar's redraw rate."""
from __future__ import annotations

import argparse
import importlib
import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from methods.core import cli
from methods.core.config import from_json

REPO = Path(__file__).resolve().parents[2]


def lfq_base_section() -> dict:
    """A real step section with nested dataclasses: lfq's `base` (model + train) at tiny scale."""
    return yaml.safe_load((REPO / "config/scales/tiny.yaml").read_text())["lfq"]["base"]


def make_parser(seen: list):
    """A CLI with one config step that validates its config like the lfq train step does."""
    from methods.lfq.config import BaseConfig

    def run(a):
        seen.append((a.config, from_json(BaseConfig, a.config, "base")))
        Path(a.out).write_text("ok")

    p, sub = cli.subcommands("demo", "a demo CLI")
    cli.config_step(sub, "train", run, "train the base", "data", "out",
                    helps={"data": "input directory: the generated corpus"})
    return p


def run_main(argv, capsys):
    seen: list = []
    rc = cli.main(make_parser(seen), argv)
    err = capsys.readouterr().err
    return rc, seen, err


def test_yaml_file_config_equals_the_inline_json(tmp_path, capsys):
    section = lfq_base_section()
    f = tmp_path / "step.yaml"
    f.write_text(yaml.safe_dump(section, sort_keys=False))
    rc, seen, _ = run_main(["train", "--config", str(f), "--data", "d", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0
    rc2, seen2, _ = run_main(["train", "--config", json.dumps(section), "--data", "d", "--out", str(tmp_path / "o")],
                             capsys)
    assert rc2 == 0
    assert json.loads(seen[0][0]) == section and seen[0][1] == seen2[0][1]
    # the file's JSON is the rules' form: compact, keys sorted
    assert seen[0][0] == json.dumps(section, sort_keys=True, separators=(",", ":"))
    # inline JSON without --set reaches the step byte for byte
    assert seen2[0][0] == json.dumps(section)


def test_at_file_json_and_yaml_12_floats(tmp_path, capsys):
    section = lfq_base_section()
    f = tmp_path / "step.json"
    f.write_text(json.dumps(section))
    rc, seen, _ = run_main(["train", "--config", f"@{f}", "--data", "d", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0 and json.loads(seen[0][0]) == section
    # `lr: 3e-4` (no dot) is a float in a YAML step file, as in YAML 1.2, not PyYAML's string
    section["train"]["lr"] = "LR"
    g = tmp_path / "step.yml"
    g.write_text(yaml.safe_dump(section).replace("LR", "3e-4"))
    rc, seen, _ = run_main(["train", "--config", f"@{g}", "--data", "d", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0 and seen[0][1].train.lr == 3e-4


def test_set_overrides_nested_keys_in_order(tmp_path, capsys):
    section = lfq_base_section()
    f = tmp_path / "step.yaml"
    f.write_text(yaml.safe_dump(section))
    rc, seen, _ = run_main(["train", "--config", str(f), "--data", "d", "--out", str(tmp_path / "o"),
                            "--set", "train.lr=1e-3", "--set", "train.lr=3e-4", "--set", "train.betas.1=0.99",
                            "--set", "model.n_kv_heads=2", "--set", "hub_id=null", "--set", "train.optimizer=sgd"],
                           capsys)
    assert rc == 0
    cfg = seen[0][1]
    assert cfg.train.lr == 3e-4 and tuple(cfg.train.betas) == (0.9, 0.99)
    assert cfg.model.n_kv_heads == 2 and cfg.hub_id is None and cfg.train.optimizer == "sgd"
    # every other key as in the file
    merged = json.loads(seen[0][0])
    merged["train"].update(lr=section["train"]["lr"], betas=section["train"]["betas"], optimizer="adamw")
    merged["model"]["n_kv_heads"] = section["model"]["n_kv_heads"]
    assert merged == section
    # inline JSON takes --set too
    rc, seen, _ = run_main(["train", "--config", json.dumps(section), "--data", "d", "--out", str(tmp_path / "o"),
                            "--set", "seq_len=64"], capsys)
    assert rc == 0 and seen[0][1].seq_len == 64


def test_set_of_an_unknown_key_fails_in_the_steps_validation_with_its_path(tmp_path, capsys):
    rc, seen, err = run_main(["train", "--config", json.dumps(lfq_base_section()), "--data", "d",
                              "--out", str(tmp_path / "o"), "--set", "train.lrr=1"], capsys)
    assert rc == 2 and not (tmp_path / "o").exists()
    assert err.count("\n") == 1 and "unknown config key 'base.train.lrr'" in err


@pytest.mark.parametrize("item, says", [
    ("train.lr", "--set 'train.lr': expected KEY=VALUE"),
    ("=3", "empty key"),
    ("train..lr=3", "empty key"),
    ("seq_len.x=3", "--set seq_len.x: 'seq_len' is {seq_len}, not a mapping"),
    ("train.betas.5=0.9", "'train.betas.5' indexes a list of 2 items"),
])
def test_bad_set_is_one_line_exit_2(tmp_path, capsys, item, says):
    section = lfq_base_section()
    says = says.format(seq_len=section["seq_len"])
    rc, seen, err = run_main(["train", "--config", json.dumps(section), "--data", "d",
                              "--out", str(tmp_path / "o"), "--set", item], capsys)
    assert rc == 2 and not seen and not (tmp_path / "o").exists()
    assert err.count("\n") == 1 and err.startswith("demo train: error: ") and says in err, err


def test_bad_yaml_file_is_one_line_naming_file_and_line(tmp_path, capsys):
    f = tmp_path / "step.yaml"
    f.write_text("seq_len: 128\ntrain: {lr: 1.0e-3, betas: [0.9, 0.95}\nseed: 0\n")
    rc, seen, err = run_main(["train", "--config", str(f), "--data", "d", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and not seen
    assert err.count("\n") == 1 and f"--config {f}: invalid YAML at line 2, column " in err, err
    # a JSON file: its own parser's line; a missing file and text that is neither: one line too
    g = tmp_path / "step.json"
    g.write_text('{\n  "seq_len": 128,\n}\n')
    for spec, says in [(str(g), f"--config {g}: invalid JSON at line 3, column 1"),
                       (f"@{tmp_path}/none.yaml", "no such file"),
                       (str(tmp_path / "none.yaml"), "no such file"),
                       ("seq_len: 3", "neither inline JSON nor an existing file"),
                       ('{"seq_len": 3,}', "--config: invalid inline JSON at line 1, column 15")]:
        rc, seen, err = run_main(["train", "--config", spec, "--data", "d", "--out", "o"], capsys)
        assert rc == 2 and not seen and err.count("\n") == 1 and says in err, (spec, err)


def test_print_config_prints_the_merged_json_and_runs_nothing(tmp_path, capsys):
    section = lfq_base_section()
    f = tmp_path / "step.yaml"
    f.write_text(yaml.safe_dump(section))
    seen: list = []
    # the file options are optional with --print-config
    rc = cli.main(make_parser(seen), ["train", "--config", str(f), "--set", "seed=7", "--print-config"])
    out, err = capsys.readouterr()
    assert rc == 0 and not seen and err == ""
    assert out == json.dumps({**section, "seed": 7}, sort_keys=True, separators=(",", ":")) + "\n"
    # and it is what a rerun's --config takes
    rc = cli.main(make_parser(seen), ["train", "--config", out.strip(), "--data", "d", "--out", str(tmp_path / "o")])
    assert rc == 0 and seen[0][1].seed == 7
    # without --print-config the file options stay required (argparse's usage error, exit 2)
    with pytest.raises(SystemExit) as e:
        make_parser([]).parse_args(["train", "--config", str(f)])
    assert e.value.code == 2


def test_a_real_step_prints_its_config(capsys):
    from methods.lfq.__main__ import build_parser

    quant = yaml.safe_load((REPO / "config/scales/tiny.yaml").read_text())["lfq"]["quant"]
    rc = cli.main(build_parser(), ["quantize", "--config", json.dumps(quant), "--set", "bits=3", "--print-config"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out) == {**quant, "bits": 3}


def test_file_options_get_generic_or_given_help():
    p = make_parser([])
    step = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    helps = {a.dest: a.help for a in step._actions}
    assert helps["data"] == "input directory: the generated corpus"       # the step's own
    assert helps["out"].startswith("output:")                              # generic by name
    assert "YAML" in helps["config"] and "KEY" in step.format_help()
    # an option added without help gets one from its name, type and default
    step.add_argument("--warm-steps", type=int, default=3)
    assert step._actions[-1].help == "warm steps (an integer); default: 3"


def _parsers(parser: argparse.ArgumentParser, path: str):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _parsers(sp, f"{path} {name}")


MAINS = sorted(p.parent.name for p in (REPO / "methods").glob("*/__main__.py"))


def test_every_paper_has_a_cli():
    from methods.core.registry import papers

    assert set(papers(REPO)) <= set(MAINS) and "core" in MAINS


@pytest.mark.parametrize("pkg", MAINS)
def test_every_option_of_every_step_has_help(pkg):
    parser = importlib.import_module(f"methods.{pkg}.__main__").build_parser()
    n = 0
    for path, p in _parsers(parser, pkg):
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            assert isinstance(a.help, str) and a.help.strip(), (path, a.option_strings or a.dest)
            n += 1
        for a in getattr(p, "_subparsers", None) and p._subparsers._group_actions or []:
            for choice in a._choices_actions:                              # each step's summary line
                assert choice.help and choice.help.strip(), (path, choice.dest)
    assert n > 2


def test_progress_bar_redraws_on_its_clock_not_on_every_logged_step(monkeypatch):
    """500 steps, each logged (set_postfix): the bar redraws by its mininterval (a few times),
    not 500 times, and still shows the last loss when it closes."""
    import torch

    from methods.core import train as T

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)
    batch = {"x": x, "y": x.sum(1, keepdim=True), "labels": torch.zeros(8, dtype=torch.long)}
    cfg = T.TrainConfig(steps=500, batch_size=8, lr=1e-2, log_every=1, schedule="constant")
    rows = T.train(model, lambda s: batch, cfg, desc="bar",
                   loss_fn=lambda m, b: ((m(b["x"]) - b["y"]) ** 2).mean())
    assert len(rows) == 500
    text = stream.getvalue()
    draws = [d for d in text.split("\r") if d.startswith("bar:")]
    assert 1 <= len(draws) <= 6, len(draws)
    assert f"loss={rows[-1]['loss']:.4f}" in draws[-1] and "500/500" in draws[-1]
