"""What users touch: a model directory of any architecture loads with the stock transformers
Auto classes once `register_all()` ran (no trust_remote_code); `icml26-lm-eval` (lm-eval's own
CLI with the project's architectures registered) scores a custom-architecture directory as a
hand computation of the same model does, where plain lm-eval cannot load it; an exported
lm-eval task folder runs after it has been moved away from where it was written.

The walk over every model directory of the smoke DAG is tests/workflow/test_model_dirs_load.py
(it needs the session's smoke run); its helpers are here."""
from __future__ import annotations

import ast
import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SCRIPT = "icml26-lm-eval"


# ----------------------------------------------------------------------------- helpers ----
def model_dirs(root: Path) -> list[Path]:
    """Every HF model directory under `root`: config.json next to weights."""
    return sorted(c.parent for c in Path(root).rglob("config.json")
                  if any(any(c.parent.glob(w)) for w in WEIGHTS))


def auto_class(config):
    """The transformers Auto class matching the config's `architectures` (a causal LM without)."""
    import transformers

    arch = (getattr(config, "architectures", None) or ["ForCausalLM"])[0]
    for suffix, name in (("ForCausalLM", "AutoModelForCausalLM"),
                         ("ForSequenceClassification", "AutoModelForSequenceClassification"),
                         ("ForTokenClassification", "AutoModelForTokenClassification"),
                         ("ForMaskedLM", "AutoModelForMaskedLM")):
        if arch.endswith(suffix):
            return getattr(transformers, name)
    return transformers.AutoModel


def load_dir(d: Path):
    """(model, tokenizer or None) of a model directory, through the Auto classes only."""
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(d)
    model = auto_class(config).from_pretrained(d).eval()
    assert type(model).__name__ == config.architectures[0]
    tok = AutoTokenizer.from_pretrained(d) if any((d / f).is_file() for f in TOKENIZER_FILES) else None
    return model, tok


def script_cmd() -> list[str]:
    """The `icml26-lm-eval` console script: the installed one next to this interpreter, else its
    entry point as pyproject.toml declares it, called as the installed wrapper calls it."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"][SCRIPT]
    installed = Path(sys.executable).parent / SCRIPT
    if installed.is_file():
        return [str(installed)]
    module, func = entry.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


def run_env(tmp_path: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", HF_DATASETS_CACHE=str(tmp_path / "hf_datasets"), TQDM_DISABLE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def answer_logprobs(model, tok, rows) -> list[float]:
    """log P(answer | prompt) of each row, summed over the answer's tokens, by hand."""
    out = []
    for r in rows:
        ctx = tok(r["prompt"], add_special_tokens=False)["input_ids"]
        cont = tok(r["answer"], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            lp = model(torch.tensor([ctx + cont])).logits[0].double().log_softmax(-1)
        out.append(sum(lp[len(ctx) - 1 + i, t].item() for i, t in enumerate(cont)))
    return out


ROWS = [{"prompt": p, "answer": a} for p, a in
        [("12+34=", "46"), ("7+5=", "12"), ("90-8=", "82"), ("3*9=", "27"), ("41+6=", "47")]]


def char_tokenizer():
    from methods.core.tokenizer import train_tokenizer

    return train_tokenizer(["0123456789+-*=\n"], kind="char")


def siamesenorm_dir(out: Path) -> Path:
    from methods.core.models import save_model
    from methods.siamesenorm.model import SiameseNormConfig, SiameseNormForCausalLM

    tok = char_tokenizer()
    torch.manual_seed(0)
    m = SiameseNormForCausalLM(SiameseNormConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=32, norm_scheme="hybrid_pre", pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, initializer_range=0.3))
    save_model(m, tok, out)
    return out


def dag_moe_dir(out: Path) -> Path:
    from methods.core.models import save_model
    from methods.dag_moe.model import DagMoEConfig, build

    tok = char_tokenizer()
    m = build(DagMoEConfig(n_experts=4, moe_k=2, expert_d_ff=8, aggregation="dag", edge_weight_init_std=0.5,
                           vocab_size=len(tok), hidden_size=16, intermediate_size=8, num_hidden_layers=2,
                           num_attention_heads=2, max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                           eos_token_id=tok.eos_token_id, initializer_range=0.3), seed=0)
    save_model(m, tok, out)
    return out


def llama_dir(out: Path) -> Path:
    from methods.core.models import ModelConfig, build_model, save_model

    tok = char_tokenizer()
    m = build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=24, max_seq_len=32, init_std=0.3), tok, 0)
    save_model(m, tok, out)
    return out


# ------------------------------------------------------------------------------- tests ----
def test_register_all_covers_every_register_arch_call():
    """`ARCH_MODULES` lists exactly the modules of methods/ that call `register_arch`, and
    `register_all` makes each of their model types known to AutoConfig."""
    from transformers import AutoConfig

    from methods.core.models import ARCH_MODULES, register_all

    callers = set()
    for f in (ROOT / "methods").rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "register_arch":
                callers.add(".".join(f.relative_to(ROOT).with_suffix("").parts))
    assert callers == set(ARCH_MODULES)
    types = register_all()
    assert types == ["icml26_dag_moe", "icml26_siamesenorm"]
    for t in types:
        assert AutoConfig.for_model(t).model_type == t


@pytest.mark.parametrize("make", [llama_dir, siamesenorm_dir, dag_moe_dir])
def test_model_dir_loads_with_auto_classes(make, tmp_path):
    """Each kind of directory `save_model` writes loads through AutoConfig /
    AutoModelForCausalLM / AutoTokenizer alone, as the class that wrote it, with the same logits."""
    from methods.core.models import load_model, register_all

    register_all()
    d = make(tmp_path / "m")
    assert model_dirs(tmp_path) == [d]
    model, tok = load_dir(d)
    ref, ref_tok = load_model(d, dtype=torch.float32)
    ids = torch.tensor([tok("12+34=46\n", add_special_tokens=False)["input_ids"]])
    assert ids.tolist() == [ref_tok("12+34=46\n", add_special_tokens=False)["input_ids"]]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits, rtol=1e-6, atol=1e-6)


def test_exported_task_folder_runs_after_a_move(tmp_path, monkeypatch):
    """export_task writes data next to the YAML under a relative name; after the folder is moved
    and its source data deleted, lm-eval (through `run_lm_eval`, from an unrelated working
    directory) scores the task: perplexity = exp(-mean log P(answer | prompt)) and acc = the
    greedy-match rate, both against the hand computation."""
    from methods.core.evaluate import export_task, run_lm_eval
    from methods.core.models import load_model
    from methods.core.results import write_jsonl

    src = tmp_path / "src" / "rows.jsonl"
    src.parent.mkdir()
    write_jsonl(src, ROWS)
    tasks = tmp_path / "results" / "tiny" / "paper" / "lm_eval_tasks"
    export_task(tasks, "t_ll", src, "loglikelihood")
    export_task(tasks, "t_gen", src, "generate_until", max_gen_toks=4)
    for name in ("t_ll", "t_gen"):
        text = (tasks / f"{name}.yaml").read_text()
        assert str(tmp_path) not in text and f"test: {name}.jsonl" in text
        assert (tasks / f"{name}.jsonl").read_text() == src.read_text()
    moved = tmp_path / "elsewhere" / "lm_eval_tasks"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "results"), str(tmp_path / "elsewhere" / "results"))
    shutil.move(str(tmp_path / "elsewhere" / "results" / "tiny" / "paper" / "lm_eval_tasks"), str(moved))
    shutil.rmtree(tmp_path / "src")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")

    model, tok = load_model(llama_dir(tmp_path / "m"), dtype=torch.float32)
    res = run_lm_eval(model, tok, ["t_ll", "t_gen"], moved, batch_size=2, device="cpu")
    lps = answer_logprobs(model, tok, ROWS)
    r = res["results"]["t_ll"]
    assert r["sample_len"] == len(ROWS) and res["results"]["t_gen"]["sample_len"] == len(ROWS)
    assert r["perplexity,none"] == pytest.approx(math.exp(-sum(lps) / len(lps)), rel=1e-5)
    greedy = []
    for row in ROWS:
        ids = tok(row["prompt"] + row["answer"], add_special_tokens=False)["input_ids"]
        n = len(tok(row["answer"], add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            pred = model(torch.tensor([ids])).logits[0, len(ids) - n - 1:-1].argmax(-1).tolist()
        greedy.append(pred == ids[-n:])
    assert r["acc,none"] == pytest.approx(sum(greedy) / len(ROWS))
    assert 0.0 <= res["results"]["t_gen"]["exact_match,none"] <= 1.0


def test_icml26_lm_eval_scores_a_custom_architecture(tmp_path):
    """`icml26-lm-eval --model hf` on a SiameseNorm directory with an exported task folder: exit
    0, a results JSON, and its perplexity equal to the hand computation with the same model;
    plain lm-eval on the same directory fails (the model type is unknown without the import)."""
    from methods.core.evaluate import export_task
    from methods.core.models import load_model
    from methods.core.results import write_jsonl

    d = siamesenorm_dir(tmp_path / "runs" / "hybrid_pre_lr0.01_s0")
    write_jsonl(tmp_path / "rows.jsonl", ROWS)
    export_task(tmp_path / "lm_eval_tasks", "arith_ll", tmp_path / "rows.jsonl", "loglikelihood")
    args = ["--model", "hf", "--model_args", f"pretrained={d},dtype=float32", "--device", "cpu",
            "--include_path", str(tmp_path / "lm_eval_tasks"), "--tasks", "arith_ll", "--limit", "4",
            "--batch_size", "2", "--output_path", str(tmp_path / "out")]
    out = subprocess.run(script_cmd() + args, cwd=tmp_path, env=run_env(tmp_path), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (res_file,) = (tmp_path / "out").rglob("results_*.json")
    res = json.loads(res_file.read_text())
    model, tok = load_model(d, dtype=torch.float32)
    lps = answer_logprobs(model, tok, ROWS[:4])
    assert res["n-samples"]["arith_ll"]["effective"] == 4
    assert res["results"]["arith_ll"]["perplexity,none"] == pytest.approx(math.exp(-sum(lps) / 4), rel=1e-5)

    plain = subprocess.run([sys.executable, "-m", "lm_eval", *args], cwd=tmp_path, env=run_env(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert plain.returncode != 0 and "icml26_siamesenorm" in plain.stderr
