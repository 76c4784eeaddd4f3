"""Bad input to a DAG step: one line naming the problem, exit status 2, no output left behind."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORLD = {"source": "world", "text_field": "text", "n_people": 20, "n_cities": 5, "n_colours": 3,
         "corpus_chars": 2000, "val_chars": 500, "mix_bio": 0.6, "mix_arith": 0.25,
         "qa_train_people": 0.5, "qa_dev_people": 0.25, "seed": 1,
         "tasks": {"T2": {"source": "world", "prompt_field": "prompt", "answer_field": "answer",
                          "n_train": 5, "n_dev": 5, "n_test": 5}}}


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def _one_line_error(out, *needles):
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], out.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("mutate,needle", [
    (lambda c: c.update(n_peeple=3), "unknown config key 'world.n_peeple'"),
    (lambda c: c.update(n_people="many"), "config key 'world.n_people'"),
    (lambda c: c["tasks"]["T2"].update(n_test=1.5), "config key 'world.tasks.T2.n_test'"),
])
def test_bad_config_names_the_key(tmp_path, mutate, needle):
    cfg = json.loads(json.dumps(WORLD))
    mutate(cfg)
    out = run("methods.wd_plasticity", "data", "--config", json.dumps(cfg), "--out", str(tmp_path / "data"))
    _one_line_error(out, needle)
    assert not (tmp_path / "data").exists()


def test_good_config_then_missing_and_corrupt_inputs(tmp_path):
    data = tmp_path / "data"
    assert run("methods.wd_plasticity", "data", "--config", json.dumps(WORLD), "--out", str(data)).returncode == 0
    # a tokenizer directory that does not exist
    cfg = {"model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 16, "max_seq_len": 16},
           "train": {"steps": 2, "batch_size": 2, "lr": 1e-3}, "seq_len": 8, "eval_batches": 1}
    out = run("methods.wd_plasticity", "pretrain", "--config", json.dumps(cfg), "--weight-decay", "0.1",
              "--seed", "0", "--shards", str(tmp_path / "shards"), "--tokenizer", str(tmp_path / "nope"),
              "--checkpoint", str(tmp_path / "ck.pt"), "--out", str(tmp_path / "base"))
    _one_line_error(out, "nope")
    assert not (tmp_path / "base").exists()
    # a corrupt summary for the claims step
    (tmp_path / "summary.json").write_text("{not json")
    out = run("methods.core", "claims", "--claims", "methods/wd_plasticity/claims.yaml",
              "--metrics", str(tmp_path / "summary.json"), "--scale", "tiny", "--out", str(tmp_path / "claims.json"))
    _one_line_error(out, "corrupt JSON", "summary.json")
    assert not (tmp_path / "claims.json").exists()
