"""The generated world: determinism, the planned mix and coverage, and leak-free task splits."""
import json
import re
from pathlib import Path

import pytest

from methods.core.results import InputError
from methods.wd_plasticity.world import QUESTIONS, TaskSource, WorldConfig, build, make_people


def task(**kw):
    return TaskSource(**{"source": "world", "prompt_field": "prompt", "answer_field": "answer",
                         "n_train": 2000, "n_dev": 250, "n_test": 500, **kw})


def world_cfg(**kw):
    return WorldConfig(**{"source": "world", "text_field": "text", "n_people": 300, "n_cities": 20,
                          "n_colours": 10, "corpus_chars": 1_200_000, "val_chars": 60_000, "mix_bio": 0.60,
                          "mix_arith": 0.25, "qa_train_people": 0.5, "qa_dev_people": 0.125, "seed": 1234,
                          "tasks": {}, **kw})


def _cfg(**kw):
    tasks = {"T1": task(), "T2": task(n_train=300, n_dev=50, n_test=80),
             "T3": task(n_train=100, n_dev=20, n_test=30)}
    return world_cfg(n_people=120, corpus_chars=150_000, val_chars=10_000, tasks=tasks, **kw)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("w") / "data"
    build(_cfg(), out)
    return out


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_deterministic(world, tmp_path):
    again = tmp_path / "data"
    build(_cfg(), again)
    for f in ["pretrain.txt", "val.txt", "people.jsonl", "tasks/T1/test.jsonl", "tasks/T2/train.jsonl"]:
        assert (world / f).read_bytes() == (again / f).read_bytes(), f


def test_corpus_mix_and_coverage(world):
    docs = (world / "pretrain.txt").read_text().splitlines()
    people = _rows(world / "people.jsonl")
    arith = [d for d in docs if re.fullmatch(r"(\d+\+\d+=\d+\. ?)+", d)]
    bio = [d for d in docs if any(d.startswith(p["name"]) for p in people) or " of " in d.split(".")[0]]
    # 60% biographies, 25% arithmetic, 15% PCFG (by document); 3-sigma binomial band
    n = len(docs)
    for share, target in ((len(arith) / n, 0.25), (len(bio) / n, 0.60)):
        assert abs(share - target) < 3 * (target * (1 - target) / n) ** 0.5 + 0.01
    # every arithmetic line is correct
    for line in arith:
        for a, b, c in re.findall(r"(\d+)\+(\d+)=(\d+)\.", line):
            assert int(a) + int(b) == int(c)
    # each person's city appears in at least 5 paraphrased sentences (≥5 paraphrases)
    text = (world / "pretrain.txt").read_text()
    for p in people:
        mentions = len(re.findall(rf"\b{p['name']}\b[^.]*\b{p['city']}\.", text)) + \
            len(re.findall(rf"the city of {p['name']} is {p['city']}\.", text))
        assert mentions >= 5, p


def test_qa_split_is_by_person_and_answers_are_true(world):
    people = {p["name"]: p for p in _rows(world / "people.jsonl")}
    names = {}
    for split in ("train", "dev", "test"):
        rows = _rows(world / "tasks" / "T1" / f"{split}.jsonl")
        names[split] = {re.search(r"(does|was) (\w+) ", r["prompt"]).group(2) for r in rows}
        for r in rows:
            name = re.search(r"(does|was) (\w+) ", r["prompt"]).group(2)
            attr = next(a for a, q in QUESTIONS.items() if r["prompt"] == f"Q: {q.format(n=name)}\nA: ")
            assert r["answer"] == people[name][attr]
    assert not names["train"] & names["test"] and not names["train"] & names["dev"] and not names["dev"] & names["test"]
    assert len(names["train"]) == 60  # half of 120 people


def test_generated_tasks_are_correct_and_disjoint(world):
    prompts = {}
    for split in ("train", "dev", "test"):
        rows = _rows(world / "tasks" / "T2" / f"{split}.jsonl")
        for r in rows:
            a, b = map(int, re.fullmatch(r"sum (\d+) (\d+) -> ", r["prompt"]).groups())
            assert r["answer"] == str(a + b)
        prompts[split] = {r["prompt"] for r in rows}
        for r in _rows(world / "tasks" / "T3" / f"{split}.jsonl"):
            xs = list(map(int, r["prompt"][5:-4].split()))
            assert r["answer"].split() == [str(x) for x in sorted(xs)]
    assert not prompts["train"] & prompts["test"] and not prompts["train"] & prompts["dev"]
    assert (len(prompts["train"]), len(prompts["dev"]), len(prompts["test"])) == (300, 50, 80)


def test_names_unique_and_disjoint_from_cities():
    people = make_people(world_cfg(n_people=300))
    names = [p["name"] for p in people]
    assert len(set(names)) == 300 and all(len(n) == 5 for n in names)


def test_bad_config_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="cities"):
        build(world_cfg(n_cities=999, tasks={"T1": task()}), tmp_path / "a")
    with pytest.raises(InputError, match="unknown generated task 'T9'"):
        build(world_cfg(n_people=20, corpus_chars=1000, val_chars=100, tasks={"T9": task()}), tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing half-written


def test_hub_source_path_loads_saved_datasets(tmp_path):
    """Paper scale reads hub datasets; the same code path on local `save_to_disk` dirs."""
    import datasets

    corpus = datasets.Dataset.from_dict({"text": [f"doc {i} " * 20 for i in range(50)]})
    corpus.save_to_disk(str(tmp_path / "corpus"))
    sft = datasets.DatasetDict({s: datasets.Dataset.from_dict({"q": [f"{s} {i}?" for i in range(5)],
                                                               "a": [str(i) for i in range(5)]})
                                for s in ("train", "validation", "test")})
    sft.save_to_disk(str(tmp_path / "sft"))
    cfg = world_cfg(source=str(tmp_path / "corpus"), corpus_chars=3000, val_chars=500,
                    tasks={"qa": task(source=str(tmp_path / "sft"), prompt_field="q", answer_field="a")})
    build(cfg, tmp_path / "data")
    val = (tmp_path / "data" / "val.txt").read_text()
    train = (tmp_path / "data" / "pretrain.txt").read_text()
    assert val.startswith("doc 0 ") and "doc 1 " not in train.splitlines()[0]
    assert 3000 <= len(val) + len(train) <= 3000 + 500 + 2 * 142
    assert _rows(tmp_path / "data" / "tasks" / "qa" / "dev.jsonl")[2] == {"prompt": "validation 2?", "answer": "2"}


def test_same_world_in_processes_with_different_hash_seeds(tmp_path):
    """The DAG's steps run in separate processes: the world and the tokenizer must not depend on
    Python's per-process hash randomisation (set/dict order of strings)."""
    import os
    import subprocess
    import sys
    from dataclasses import asdict

    cfg = json.dumps(asdict(world_cfg(n_people=60, corpus_chars=20000, val_chars=2000,
                                      tasks={"T1": task(), "T2": task(n_train=50, n_dev=10, n_test=10)})))
    digests = []
    for seed in ("1", "2"):
        out = tmp_path / f"w{seed}"
        code = (
            "import json, sys, hashlib\n"
            "from methods.core.config import from_json\n"
            "from methods.core.tokenizer import train_tokenizer\n"
            "from methods.wd_plasticity.world import WorldConfig, build\n"
            f"build(from_json(WorldConfig, {cfg!r}), {str(out)!r})\n"
            f"tok = train_tokenizer([open({str(out / 'pretrain.txt')!r}).read()])\n"
            "print(json.dumps(tok.get_vocab(), sort_keys=True))\n"
        )
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[2], timeout=120)
        assert res.returncode == 0, res.stderr
        files = sorted(p for p in out.rglob("*") if p.is_file())
        digests.append(([f.relative_to(out) for f in files], [f.read_bytes() for f in files], res.stdout))
    assert digests[0] == digests[1]
