"""Every model directory the smoke DAG writes loads with the transformers Auto classes after
`register_all()` (the Auto class of its config's `architectures`; AutoTokenizer where it saved a
tokenizer), and `icml26-lm-eval` runs a SiameseNorm run (a custom architecture) on the task
folder the DAG exported, after the results folder has been moved."""
from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter

import pytest

from tests.core.test_model_dirs_load import TOKENIZER_FILES, load_dir, model_dirs, run_env, script_cmd

pytestmark = pytest.mark.workflow


def test_every_smoke_model_dir_loads(smoke_run):
    from methods.core.models import register_all

    register_all()
    root = smoke_run["config"]["results_dir"] / "smoke"
    dirs = model_dirs(root)
    per_paper, failed = Counter(), []
    for d in dirs:
        per_paper[d.relative_to(root).parts[0]] += 1
        try:
            _, tok = load_dir(d)
        except Exception as e:  # collect every failure, then report them together
            failed.append(f"{d.relative_to(root)}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        has_tok = any((d / f).is_file() for f in TOKENIZER_FILES)
        assert (tok is not None) == has_tok
    print("model directories per paper:", dict(sorted(per_paper.items())))
    assert not failed, "\n".join(failed)
    # the custom architectures and the asag model are among them
    assert {"siamesenorm", "dag_moe", "asag"} <= set(per_paper)


def test_icml26_lm_eval_on_a_moved_smoke_run(smoke_run, tmp_path):
    from methods.siamesenorm.config import GENERATED_TASK

    src = smoke_run["config"]["results_dir"] / "smoke" / "siamesenorm"
    moved = tmp_path / "moved"
    shutil.copytree(src / "lm_eval_tasks", moved / "lm_eval_tasks")
    run = sorted((src / "runs").iterdir())[0]
    shutil.copytree(run, moved / "runs" / run.name)
    args = ["--model", "hf", "--model_args", f"pretrained={moved / 'runs' / run.name}", "--device", "cpu",
            "--include_path", str(moved / "lm_eval_tasks"), "--tasks", GENERATED_TASK, "--limit", "4",
            "--output_path", str(tmp_path / "out")]
    out = subprocess.run(script_cmd() + args, cwd=tmp_path, env=run_env(tmp_path), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (res_file,) = (tmp_path / "out").rglob("results_*.json")
    res = json.loads(res_file.read_text())
    assert res["n-samples"][GENERATED_TASK]["effective"] == 4
    assert 0.0 <= res["results"][GENERATED_TASK]["exact_match,none"] <= 1.0
