"""Local stand-ins for the hub models and datasets that `config/scales/paper.yaml` names, so that
each paper's paper-scale DAG runs end to end on a CPU with no network.

- Models: tiny random Llama, Qwen2 and Qwen3 architectures saved with `save_pretrained`
  (safetensors), each with a real byte-level BPE tokenizer that follows its family's
  conventions: Llama-3 (bos `<|begin_of_text|>` prepended, eos `<|eot_id|>`/`<|end_of_text|>`,
  no pad, no unk) and Qwen (eos = pad = `<|endoftext|>`, no bos, no unk, ChatML template).
- Datasets: directories laid out like hub dataset repositories (JSONL data files and a README
  whose `configs:` name the subsets and splits), with the real datasets' field names and
  splits, so `datasets.load_dataset(dir, subset, split=...)` (streaming too) reads them exactly
  as it reads the hub.
- Scales: `config/scales/paper.yaml` with every hub id replaced by its stand-in's path, LLM
  endpoints pointed at a local server, and per-paper numbers shrunk: `overlays/common.yaml`
  maps the hub ids, `overlays/<paper>.yaml` holds a paper's numbers (and any ids, datasets or
  lm-eval tasks only it needs). A paper has a stand-in paper path exactly when it has an
  overlay file. A shared part of methods/core with a section of its own (the model pool,
  `overlays/model_pool.yaml`) is shrunk whenever it has an overlay. The result must still
  validate against `config/scale.schema.yaml`.

    python -m tests.paper_path.standins --out build/standins      # build, then print the
                                                                  # snakemake command to run
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = Path(__file__).with_name("overlays")


def core_overlays() -> list[str]:
    """The shared parts of methods/core with a section of their own (the model pool) that have
    a stand-in overlay: always applied, whichever papers run."""
    from methods.core import registry

    return [c for c in registry.core_parts(ROOT) if (OVERLAYS / f"{c}.yaml").is_file()]


def overlay_papers() -> list[str]:
    """The papers with a stand-in overlay, i.e. whose paper path runs on stand-ins."""
    return sorted(p.stem for p in OVERLAYS.glob("*.yaml") if p.stem != "common" and p.stem not in core_overlays())


def load_overlay() -> dict:
    """The common id maps merged with every paper's (and shared part's) overlay: {models,
    datasets, lm_eval_tasks, papers: {paper or shared part: numbers}}."""
    spec = yaml.safe_load((OVERLAYS / "common.yaml").read_text())
    spec.setdefault("lm_eval_tasks", {})
    spec["papers"] = {}
    for name in overlay_papers() + core_overlays():
        o = yaml.safe_load((OVERLAYS / f"{name}.yaml").read_text())
        unknown = set(o) - {"paper", "models", "datasets", "lm_eval_tasks"}
        if unknown:
            raise KeyError(f"overlays/{name}.yaml: unknown key(s) {sorted(unknown)}")
        for key in ("models", "datasets", "lm_eval_tasks"):
            for k, v in (o.get(key) or {}).items():
                if spec[key].get(k, v) != v:
                    raise KeyError(f"overlays/{name}.yaml maps {k!r} differently from another overlay")
                spec[key][k] = v
        spec["papers"][name] = o.get("paper") or {}
    return spec

QWEN_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3_CHAT = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
               "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
               "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


# ---------------------------------------------------------------------------- text ----
def _sentence(rng: random.Random) -> str:
    from methods.core.data import pcfg_sentence

    return pcfg_sentence(rng).capitalize()


def _problem(rng: random.Random) -> tuple[str, str, str]:
    """(problem, worked solution with a \\boxed answer, answer) of a small arithmetic question."""
    a, b, c = rng.randrange(2, 60), rng.randrange(2, 60), rng.randrange(2, 9)
    ans = (a + b) * c
    problem = f"What is $({a}+{b}) \\times {c}$?"
    solution = f"First ${a}+{b}={a + b}$, then ${a + b} \\times {c} = {ans}$. The answer is $\\boxed{{{ans}}}$."
    return problem, solution, str(ans)


def corpus_text(rng: random.Random, n_sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(n_sentences))


# ----------------------------------------------------------------------- tokenizers ----
def build_tokenizer(family: str, texts: list[str], vocab_size: int = 600):
    """A trained byte-level BPE `PreTrainedTokenizerFast` with `family`'s special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if family == "llama":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|eot_id|>"]
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if family == "llama":
        # Llama-3 prepends <|begin_of_text|> to every encoding (its TemplateProcessing)
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token="<|eot_id|>",
                                       chat_template=LLAMA3_CHAT, model_max_length=131072)
    # Qwen: eos and pad are the same token, no bos, no unk
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   chat_template=QWEN_CHAT, model_max_length=32768)


# --------------------------------------------------------------------------- models ----
ARCH = {"d": 32, "layers": 2, "heads": 4, "kv_heads": 2, "ff": 64, "max_pos": 8192}


def build_model(family: str, tokenizer, seed: int = 0):
    """A tiny random model of the family's real architecture class."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=ARCH["d"], intermediate_size=ARCH["ff"],
                  num_hidden_layers=ARCH["layers"], num_attention_heads=ARCH["heads"],
                  num_key_value_heads=ARCH["kv_heads"], max_position_embeddings=ARCH["max_pos"],
                  tie_word_embeddings=False)
    if family == "llama":
        eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|eot_id|>")]
        cfg = tf.LlamaConfig(**common, bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
                             rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
        model = tf.LlamaForCausalLM(cfg)
    elif family == "qwen2":
        cfg = tf.Qwen2Config(**common, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        model = tf.Qwen2ForCausalLM(cfg)
    elif family == "qwen3":
        cfg = tf.Qwen3Config(**common, head_dim=ARCH["d"] // ARCH["heads"], eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
        model = tf.Qwen3ForCausalLM(cfg)
    else:
        raise ValueError(f"unknown stand-in family {family!r}")
    model.generation_config = tf.GenerationConfig(eos_token_id=cfg.eos_token_id,
                                                  pad_token_id=getattr(cfg, "pad_token_id", None))
    return model


def write_model(family: str, out: Path, texts: list[str]) -> None:
    tok = build_tokenizer(family, texts)
    model = build_model(family, tok)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


# ------------------------------------------------------------------------- datasets ----
def _rows(kind: str, split: str, n: int, rng: random.Random) -> list[dict]:
    """`n` records of stand-in dataset `kind` in the real dataset's schema."""
    out = []
    for i in range(n):
        p, s, a = _problem(rng)
        if kind == "text":                  # fineweb-edu, dolma, Nemotron-CC: one document per row
            out.append({"text": corpus_text(rng, rng.randrange(3, 12)), "id": f"doc{i}"})
        elif kind == "wikitext":            # Salesforce/wikitext: one line per row, blank lines too
            out.append({"text": "" if i % 7 == 0 else f" {corpus_text(rng, rng.randrange(1, 4))} \n"})
        elif kind == "metamathqa":          # meta-math/MetaMathQA
            out.append({"query": p, "response": s, "type": "GSM_Rephrased", "original_question": p})
        elif kind == "s1k":                 # simplescaling/s1K-1.1
            out.append({"question": p, "solution": s, "cot_type": "math", "source_type": "standin",
                        "metadata": "{}", "gemini_thinking_trajectory": s, "gemini_attempt": s,
                        "deepseek_thinking_trajectory": s, "deepseek_attempt": s})
        elif kind == "math500":             # HuggingFaceH4/MATH-500
            out.append({"problem": p, "solution": s, "answer": a, "subject": "Prealgebra", "level": 1 + i % 5,
                        "unique_id": f"test/prealgebra/{i}.json"})
        elif kind == "hendrycks_math":      # EleutherAI/hendrycks_math (one config per subject)
            out.append({"problem": p, "level": f"Level {1 + i % 5}", "type": "Prealgebra", "solution": s})
        elif kind == "aime_maxwell":        # Maxwell-Jia/AIME_2024
            out.append({"ID": f"2024-I-{i + 1}", "Problem": p, "Solution": s, "Answer": int(a)})
        elif kind == "aime25":              # math-ai/aime25
            out.append({"problem": p, "answer": a, "id": str(i)})
        else:
            raise ValueError(f"unknown stand-in dataset kind {kind!r}")
    return out


# kind → {subset: {split: n_rows}}; None = the default (unnamed) config
DATASET_LAYOUTS = {
    "text": {None: {"train": 400}},
    "wikitext": {"wikitext-2-raw-v1": {"train": 600, "validation": 120, "test": 200},
                 "wikitext-103-raw-v1": {"train": 600, "validation": 120, "test": 200}},
    "metamathqa": {None: {"train": 300}},
    "s1k": {None: {"train": 120}},
    "math500": {None: {"test": 60}},
    "hendrycks_math": {s: {"train": 40, "test": 20} for s in (
        "algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory",
        "prealgebra", "precalculus")},
    "aime_maxwell": {None: {"train": 30}},
    "aime25": {None: {"test": 30}},
}


def write_dataset(kind: str, out: Path, seed: int = 0) -> None:
    """A hub-layout dataset directory: `<subset>/<split>.jsonl` and a README `configs:` block."""
    rng = random.Random(f"{kind}-{seed}")
    configs = []
    for subset, splits in DATASET_LAYOUTS[kind].items():
        sub = subset or "default"
        files = []
        for split, n in splits.items():
            path = out / sub / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in _rows(kind, split, n, rng)))
            files.append({"split": split, "path": f"{sub}/{split}.jsonl"})
        configs.append({"config_name": sub, "data_files": files})
    header = yaml.safe_dump({"configs": configs}, sort_keys=False)
    (out / "README.md").write_text(f"---\n{header}---\nStand-in for a hub dataset ({kind}); generated by "
                                   "tests/paper_path/standins.py.\n")


# ------------------------------------------------------------- single-file datasets ----
# Datasets released as one file outside the hub (e.g. LoCoMo's locomo10.json in the
# snap-research/locomo GitHub repository): the config names a local path, and the overlay maps
# that path to the stand-in file itself. kind → file name.
DATASET_FILES = {"locomo": "locomo10.json"}

_LOCOMO_NAMES = ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]


def _locomo(rng: random.Random, n_conv: int = 2, n_sessions: int = 3, n_turns: int = 4, n_qa: int = 6) -> list[dict]:
    """locomo10.json: a list of samples {"sample_id", "conversation": {"speaker_a", "speaker_b",
    "session_<n>_date_time" ("1:56 pm on 8 May, 2023"), "session_<n>": [{"speaker", "dia_id"
    ("D<n>:<t>"), "text"} (+ "img_url", "blip_caption", "query" on image turns)]}, "qa": [{"question",
    "answer" (a string or a number), "evidence": [dia_ids], "category" 1-4}, category 5 with
    "adversarial_answer" instead of "answer"], "event_summary", "observation", "session_summary"}."""
    out = []
    for c in range(n_conv):
        a, b = _LOCOMO_NAMES[2 * c % len(_LOCOMO_NAMES)], _LOCOMO_NAMES[(2 * c + 1) % len(_LOCOMO_NAMES)]
        conv, turn_ids = {"speaker_a": a, "speaker_b": b}, []
        events, obs, summ = {}, {}, {}
        for s in range(1, n_sessions + 1):
            h, m = rng.randrange(1, 13), rng.randrange(60)
            conv[f"session_{s}_date_time"] = (f"{h}:{m:02d} {rng.choice(['am', 'pm'])} on {rng.randrange(1, 29)} "
                                              f"{_MONTHS[(4 + s) % 12]}, 2023")
            turns = []
            for t in range(1, n_turns + 1):
                turn = {"speaker": a if t % 2 else b, "dia_id": f"D{s}:{t}", "text": _sentence(rng)}
                if t == 3:      # an image-sharing turn, as in LoCoMo
                    turn.update(img_url=[f"https://example.invalid/{c}-{s}-{t}.jpg"],
                                blip_caption=f"a photo of {_sentence(rng).lower().rstrip('.')}", query="photo")
                turns.append(turn)
                turn_ids.append(turn["dia_id"])
            conv[f"session_{s}"] = turns
            events[f"events_session_{s}"] = {a: [_sentence(rng)], b: [], "date": conv[f"session_{s}_date_time"]}
            obs[f"session_{s}_observation"] = {a: [[_sentence(rng), f"D{s}:1"]], b: [[_sentence(rng), f"D{s}:2"]]}
            summ[f"session_{s}_summary"] = corpus_text(rng, 2)
        qa = []
        for i in range(n_qa):
            cat = 1 + i % 5
            ev = rng.sample(turn_ids, 2 if cat == 1 else 1)
            q = {"question": _sentence(rng).rstrip(".") + "?", "evidence": ev, "category": cat}
            if cat == 5:
                q["adversarial_answer"] = _sentence(rng)
            else:
                q["answer"] = rng.randrange(2000, 2024) if cat == 2 and i % 2 else _sentence(rng)
            qa.append(q)
        out.append({"qa": qa, "conversation": conv, "event_summary": events, "observation": obs,
                    "session_summary": summ, "sample_id": f"conv-{26 + c}"})
    return out


def write_dataset_file(kind: str, out: Path, seed: int = 0) -> None:
    """The single-file stand-in of `kind` (DATASET_FILES) at `out`."""
    rng = random.Random(f"{kind}-{seed}")
    if kind == "locomo":
        data = _locomo(rng)
    else:
        raise ValueError(f"unknown stand-in dataset file kind {kind!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))


# ------------------------------------------------------------------------ the scales ----
def _merge(base, over):
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            if k not in base:
                raise KeyError(f"overlay key {k!r} is not in paper.yaml")
            out[k] = _merge(base[k], v)
        return out
    return over


def _replace_ids(node, mapping: dict[str, str], base_url: str | None):
    if isinstance(node, dict):
        out = {k: _replace_ids(v, mapping, base_url) for k, v in node.items()}
        if base_url and "base_url" in out:
            out["base_url"] = base_url
        return out
    if isinstance(node, list):
        return [_replace_ids(v, mapping, base_url) for v in node]
    if isinstance(node, str) and node in mapping:
        return mapping[node]
    return node


def build(out: Path, papers: list[str] | None = None, base_url: str | None = None) -> Path:
    """Write the stand-ins under `out` and `out/scales/{smoke,tiny,paper}.yaml`; return the scales dir.
    `papers` limits the overlay's paper sections that are shrunk (all by default)."""
    spec = load_overlay()
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    texts = [corpus_text(rng, 8) for _ in range(300)] + ["".join(_problem(rng)) for _ in range(300)]
    mapping = {}
    for family in sorted(set(spec["models"].values())):
        d = out / "models" / family
        if not (d / "config.json").exists():
            write_model(family, d, texts)
    for hub_id, family in spec["models"].items():
        mapping[hub_id] = str(out / "models" / family)
    for hub_id, kind in spec["datasets"].items():
        d = out / "datasets" / kind
        if kind in DATASET_FILES:         # one file (not a hub repo): the path maps to the file
            f = d / DATASET_FILES[kind]
            if not f.exists():
                write_dataset_file(kind, f)
            mapping[hub_id] = str(f)
            continue
        if not (d / "README.md").exists():
            write_dataset(kind, d)
        mapping[hub_id] = str(d)
    tasks_dir = out / "lm_eval_tasks"
    write_lm_eval_tasks(tasks_dir, spec["lm_eval_tasks"])
    paper = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())
    over = {k: v for k, v in spec["papers"].items() if papers is None or k in papers or k in core_overlays()}
    paper = _replace_ids(_merge(paper, over), mapping, base_url)
    scales = out / "scales"
    scales.mkdir(exist_ok=True)
    for s in ("smoke", "tiny"):
        shutil.copy(ROOT / "config" / "scales" / f"{s}.yaml", scales / f"{s}.yaml")
    (scales / "paper.yaml").write_text(
        "# Generated by tests/paper_path/standins.py: config/scales/paper.yaml with hub ids mapped to\n"
        "# local stand-ins and the numbers of tests/paper_path/overlay.yaml\n" + yaml.safe_dump(paper, sort_keys=False))
    return scales


# ----------------------------------------------------------------------- lm-eval tasks ----
def write_lm_eval_tasks(out: Path, tasks: dict[str, dict]) -> None:
    """Local lm-eval tasks that carry the real tasks' names and output types (they take
    precedence over the registered ones through $ICML26_LM_EVAL_TASKS), each on a small JSONL
    of generated items; `tasks` maps name → {output_type, tag (optional), n, context (optional:
    sentences of filler context before each generate_until question, for long-context suites such
    as LongBench), synthetic (optional: `ruler_niah`, items generated at load time from the task
    metadata as lm-eval's RULER tasks do, see RULER_NIAH_PY)}."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for name, t in tasks.items():
        rows = []
        for i in range(t.get("n", 8)):
            p, s, a = _problem(rng)
            rows.append({"question": p, "answer": a, "choices": [a, str(int(a) + 1), str(int(a) + 2)],
                         "label": 0, "text": corpus_text(rng, 3)})
        if t.get("context"):  # its own generator: the shared stream (every other task's items) is unchanged
            crng = random.Random(f"{name}-context")
            for r in rows:
                r["context"] = corpus_text(crng, t["context"])
        data = out / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
               "test_split": "test", "output_type": t["output_type"], "metadata": {"version": 1.0}}
        if t.get("tag"):
            cfg["tag"] = t["tag"]
        kind = t["output_type"]
        if kind == "multiple_choice":
            cfg.update(doc_to_text="{{question}}", doc_to_choice="{{choices}}", doc_to_target="{{label}}",
                       metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
        elif kind == "generate_until":
            cfg.update(doc_to_text="Q: {{question}}\nA:", doc_to_target=" {{answer}}",
                       generation_kwargs={"until": ["\n"], "max_gen_toks": 8, "do_sample": False},
                       metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}])
            if t.get("context"):
                cfg["doc_to_text"] = "{{context}}\n\n" + cfg["doc_to_text"]
        elif kind == "loglikelihood":
            cfg.update(doc_to_text="{{question}} =", doc_to_target=" {{answer}}",
                       metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
        elif kind == "loglikelihood_rolling":
            # as lm-eval's wikitext: the metrics' registered aggregations (weighted_perplexity,
            # bits_per_byte); "word_perplexity" etc. are metrics, not aggregation names
            cfg.update(doc_to_text="", doc_to_target="{{text}}",
                       metric_list=[{"metric": m} for m in ("word_perplexity", "byte_perplexity", "bits_per_byte")])
        else:
            raise ValueError(f"stand-in task {name}: unknown output_type {kind!r}")
        function = None
        if t.get("synthetic") == "ruler_niah":
            if kind != "generate_until":
                raise ValueError(f"stand-in task {name}: RULER tasks are generate_until")
            (out / "standin_ruler.py").write_text(RULER_NIAH_PY)
            data.unlink()
            cfg.update(dataset_path="", dataset_kwargs={"n_per_length": t.get("n", 8), "seed": name},
                       doc_to_text="{{input}}", doc_to_target="{{outputs[0]}}", target_delimiter=" ")
            function = "standin_ruler.niah"
        elif t.get("synthetic"):
            raise ValueError(f"stand-in task {name}: unknown synthetic kind {t['synthetic']!r}")
        text = yaml.safe_dump(cfg, sort_keys=False)
        if function:  # lm-eval's YAML tag for a function in a module beside the YAML file
            text += f"custom_dataset: !function {function}\n"
        (out / f"{name}.yaml").write_text(text)


RULER_NIAH_PY = '''"""Generated by tests/paper_path/standins.py: a stand-in for lm-eval's RULER niah tasks.
As the real ones (lm_eval/tasks/ruler/niah_utils.py), the items are generated when the task loads,
one set per `max_seq_lengths` entry of the task metadata (lm-eval passes the TaskManager's metadata
to `custom_dataset`), each prompt filled with haystack to that many tokens (less the generation)
with the tokenizer the metadata names (`tokenizer`, `pretrained` or `model`). Stricter than the
real tasks: `max_seq_lengths` must be set (the real ones fall back to 4096)."""
import random

import datasets

HAYSTACK = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
TEMPLATE = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
            "I will quiz you about the numbers afterwards.\\n{context}\\nWhat is the special magic number "
            "for {key} mentioned in the provided text?")
GEN_TOKENS = 8


def niah(n_per_length=8, seed="niah", **metadata):
    lengths = metadata.get("max_seq_lengths")
    if not lengths:
        raise ValueError("stand-in RULER task: the task metadata has no max_seq_lengths")
    name = next((metadata[k] for k in ("tokenizer", "pretrained", "model")
                 if isinstance(metadata.get(k), str) and metadata[k]), None)
    if name is None:
        raise ValueError("stand-in RULER task: no tokenizer in the task metadata (RULER sizes its prompts "
                         "with it; pass tokenizer=<name or path>)")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    rng = random.Random(str(seed))
    rows = []
    for seq in lengths:
        for i in range(n_per_length):
            key, value = f"item-{rng.randrange(1000)}", str(rng.randrange(10 ** 6, 10 ** 7))
            depth = rng.random()

            def prompt(n):
                cut = round(depth * n)
                context = HAYSTACK * cut + f"One of the special magic numbers for {key} is: {value}. " \\
                    + HAYSTACK * (n - cut)
                return TEMPLATE.format(context=context, key=key)

            def fits(n):
                return len(tok(prompt(n))["input_ids"]) + GEN_TOKENS <= seq

            if not fits(0):
                raise ValueError(f"stand-in RULER task: max_seq_length {seq} is shorter than the template")
            hi = 1
            while fits(hi):
                hi *= 2
            lo = hi // 2                      # fits(lo), not fits(hi): the largest fitting haystack
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            text = prompt(lo)
            rows.append({"index": i, "input": text, "outputs": [value], "length": len(tok(text)["input_ids"]),
                         "max_length": seq})
    return {"test": datasets.Dataset.from_list(rows)}
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/standins")
    ap.add_argument("--base-url", default=None, help="URL of the OpenAI-compatible server for LLM endpoints")
    a = ap.parse_args(argv)
    scales = build(Path(a.out).resolve(), base_url=a.base_url)
    print(f"ICML26_LM_EVAL_TASKS={Path(a.out).resolve() / 'lm_eval_tasks'} snakemake --cores all "
          f"--config scale=paper scales_dir={scales} results_dir={Path(a.out).resolve() / 'results'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
