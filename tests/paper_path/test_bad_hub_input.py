"""Bad paper-scale input stops a step with one line naming the id, split or token, a non-zero
exit, and no output left looking complete: a hub id that cannot be loaded, a dataset without
the split a step needs, a tokenizer without the token a method needs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.workflow.conftest import ROOT, snakemake_env

from .standins import write_dataset, write_model

pytestmark = pytest.mark.paper_path


def step(*args: str) -> subprocess.CompletedProcess:
    env = {**snakemake_env(), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0], proc.stderr[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama") / "m"
    write_model("llama", d, ["The cat sees the dog. 1+2=3."] * 50)
    return d


def test_hub_model_that_cannot_be_loaded(tmp_path):
    """lfq's base step at paper scale with a hub id that is not there (offline: not cached)."""
    base = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())["lfq"]["base"]
    base["hub_id"] = "no-such-org/no-such-model-7B"
    out = tmp_path / "base"
    line = one_line_error(step("methods.lfq", "train", "--config", json.dumps(base), "--data", str(tmp_path),
                               "--out", str(out), "--runtime", '{"device": "auto", "dtype": "auto"}'))
    assert "no-such-org/no-such-model-7B" in line
    assert not out.exists()


def test_dataset_without_the_split_the_step_needs(tmp_path, llama):
    """The shards step reads `train`; MATH-500 publishes only `test`."""
    write_dataset("math500", tmp_path / "math500")
    out = tmp_path / "shards"
    line = one_line_error(step("methods.core", "shards", "--source", str(tmp_path / "math500"),
                               "--text-field", "problem", "--tokenizer", str(llama), "--val-tokens", "10",
                               "--out", str(out)))
    assert "split" in line and "train" in line and "math500" in line
    assert not out.exists()


def test_tokenizer_without_the_token_a_method_needs(tmp_path, llama):
    """SFT pads its batches; a tokenizer with neither a pad nor an eos token cannot."""
    from transformers import AutoTokenizer

    base = tmp_path / "base"
    for f in llama.iterdir():
        (base / f.name).parent.mkdir(exist_ok=True)
        (base / f.name).write_bytes(f.read_bytes())
    tok = AutoTokenizer.from_pretrained(str(llama))
    tok.eos_token = None
    tok.save_pretrained(str(base))
    task = tmp_path / "task"
    task.mkdir()
    for split in ("train", "dev", "test"):
        (task / f"{split}.jsonl").write_text(json.dumps({"prompt": "1+2=", "answer": "3"}) + "\n")
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "smoke.yaml").read_text())["wd_plasticity"]["finetune"]
    out = tmp_path / "ft"
    line = one_line_error(step("methods.wd_plasticity", "finetune", "--config", json.dumps(cfg), "--base", str(base),
                               "--task-dir", str(task), "--seed", "0", "--out", str(out),
                               "--metrics", str(tmp_path / "ft.json")))
    assert "neither a pad nor an eos token" in line
    assert not out.exists() and not (tmp_path / "ft.json").exists()
