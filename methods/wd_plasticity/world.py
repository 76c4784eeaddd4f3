"""The data of the study: a pretraining corpus and downstream SFT tasks.

Tiny scales generate a synthetic world (our design): invented people with a city, a favourite
colour and a birth year, described in biography paraphrases, mixed with arithmetic lines and
PCFG filler. The downstream tasks use formats never seen in pretraining:
  T1  QA extraction  "Q: where does kovar live?\\nA: " → "lima". Train on one set of people,
      dev/test on others, so the answers must come from knowledge stored in pretraining.
  T2  new arithmetic format  "sum 23 45 -> " → "68".
  T3  sorting  "sort 5 2 9 -> " → "2 5 9".
At paper scale the same files are written from hub datasets (`source` = a hub id or a local
`save_to_disk` directory) through `methods.core.data.load_records`.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from methods.core.data import arithmetic_line, iter_texts, load_records, pcfg_sentence
from methods.core.results import InputError, atomic_path, write_jsonl
from methods.wd_plasticity.config import TaskSource, WorldConfig

CITIES = ["lima", "oslo", "rome", "kyiv", "doha", "baku", "bern", "cairo", "dakar", "hanoi",
          "kabul", "lagos", "minsk", "paris", "quito", "riga", "seoul", "sofia", "tunis", "accra",
          "delhi", "dubai", "perth", "tokyo", "vaduz", "malmo", "turin", "porto", "split", "ghent"]
COLOURS = ["teal", "red", "blue", "green", "amber", "pink", "grey", "olive", "navy", "plum",
           "ivory", "coral"]
# Paraphrases per attribute; every person's facts appear in several of them.
TEMPLATES = {
    "city": ["{n} lives in {v}.", "{n} has a home in {v}.", "the city of {n} is {v}."],
    "colour": ["{n}'s favourite colour is {v}.", "{n} likes the colour {v}."],
    "year": ["{n} was born in {v}.", "{n}'s birth year is {v}."],
}
QUESTIONS = {"city": "where does {n} live?", "colour": "what colour does {n} like?",
             "year": "when was {n} born?"}


def make_people(cfg: WorldConfig) -> list[dict]:
    if cfg.n_cities > len(CITIES) or cfg.n_colours > len(COLOURS):
        raise InputError(f"world: at most {len(CITIES)} cities and {len(COLOURS)} colours")
    rng = random.Random(cfg.seed)
    # a list, not a set: set order depends on PYTHONHASHSEED, so the world would differ by process
    names: list[str] = []
    while len(names) < cfg.n_people:
        # consonant-vowel names ("kovar"): pronounceable, and disjoint from the vocab of cities
        c, v = "bdfghklmnprstvz", "aeiou"
        name = "".join(rng.choice(c if i % 2 == 0 else v) for i in range(5))
        if name not in names:
            names.append(name)
    return [{"name": n, "city": rng.choice(CITIES[: cfg.n_cities]),
             "colour": rng.choice(COLOURS[: cfg.n_colours]), "year": str(rng.randint(1900, 1999))}
            for n in names]


def biography(rng: random.Random, person: dict) -> str:
    """One document: 4 sentences, each fact at least once, paraphrases drawn at random."""
    attrs = list(TEMPLATES) + [rng.choice(list(TEMPLATES))]
    rng.shuffle(attrs)
    return " ".join(rng.choice(TEMPLATES[a]).format(n=person["name"], v=person[a]) for a in attrs)


def corpus(cfg: WorldConfig, people: list[dict], n_chars: int, seed: int) -> str:
    rng = random.Random(seed)
    docs, size = [], 0
    # each person appears in ≥5 paraphrased documents: a full round of people every so often
    order: list[dict] = []
    while size < n_chars:
        u = rng.random()
        if u < cfg.mix_bio:
            if not order:
                order = people[:]
                rng.shuffle(order)
            doc = biography(rng, order.pop())
        elif u < cfg.mix_bio + cfg.mix_arith:
            doc = " ".join(arithmetic_line(rng) for _ in range(4))
        else:
            doc = " ".join(pcfg_sentence(rng) for _ in range(3))
        docs.append(doc)
        size += len(doc) + 1
    return "\n".join(docs) + "\n"


def qa_task(cfg: WorldConfig, people: list[dict]) -> dict[str, list[dict]]:
    n_tr = int(cfg.n_people * cfg.qa_train_people)
    n_dev = int(cfg.n_people * cfg.qa_dev_people)
    groups = {"train": people[:n_tr], "dev": people[n_tr:n_tr + n_dev], "test": people[n_tr + n_dev:]}
    return {split: [{"prompt": f"Q: {QUESTIONS[a].format(n=p['name'])}\nA: ", "answer": p[a]}
                    for p in ps for a in QUESTIONS] for split, ps in groups.items()}


def _unique_examples(make, rng: random.Random, sizes: dict[str, int]) -> dict[str, list[dict]]:
    """Disjoint train/dev/test examples (no test prompt is ever trained on)."""
    seen, out = set(), {}
    for split, n in sizes.items():
        rows = []
        while len(rows) < n:
            ex = make(rng)
            if ex["prompt"] not in seen:
                seen.add(ex["prompt"])
                rows.append(ex)
        out[split] = rows
    return out


def sum_example(rng: random.Random) -> dict:
    a, b = rng.randrange(100), rng.randrange(100)
    return {"prompt": f"sum {a} {b} -> ", "answer": str(a + b)}


def sort_example(rng: random.Random) -> dict:
    xs = [rng.randrange(10) for _ in range(rng.randint(3, 5))]
    return {"prompt": f"sort {' '.join(map(str, xs))} -> ", "answer": " ".join(map(str, sorted(xs)))}


GENERATED_TASKS = {"T2": sum_example, "T3": sort_example}


def hub_task(spec: TaskSource, seed: int) -> tuple[dict[str, list[dict]], dict]:
    """A hub SFT set as train/dev/test prompt→answer records, and how the splits were made.

    Splits the dataset publishes (`validation` as dev, `test`) are used as they are.
    MetaMathQA and s1K-1.1 publish only `train`: dev (`n_dev` rows) and test (`n_test` rows)
    are then carved from `train` by a permutation seeded with `seed` and the task name, and the
    indices are recorded, so the split is reproducible and auditable. `n_train` caps train."""
    from methods.core.data import dataset_splits

    have = dataset_splits(spec.source)
    want = {"train": "train", "dev": "validation", "test": "test"}
    if "train" not in have:
        raise InputError(f"dataset {spec.source} has no split 'train' (has {sorted(have)})")
    raw = {k: load_records(spec.source, split=v) for k, v in want.items() if v in have}
    record = {"splits_from_hub": sorted(k for k in raw), "carved_from_train": []}
    carve = [k for k in ("dev", "test") if k not in raw]
    if carve:
        train = raw["train"]
        need = sum(getattr(spec, f"n_{k}") for k in carve)
        if need >= len(train):
            raise InputError(f"dataset {spec.source}: cannot carve {need} dev/test rows from {len(train)} train rows")
        order = list(range(len(train)))
        random.Random(f"{seed}-{spec.source}").shuffle(order)
        start = 0
        for k in carve:
            idx = sorted(order[start:start + getattr(spec, f"n_{k}")])
            raw[k] = [train[i] for i in idx]
            record["carved_from_train"].append({"split": k, "indices": idx})
            start += len(idx)
        raw["train"] = [train[i] for i in sorted(order[start:])]
    raw["train"] = raw["train"][:spec.n_train]
    out = {}
    for split, rows in raw.items():
        try:
            out[split] = [{"prompt": r[spec.prompt_field], "answer": r[spec.answer_field]} for r in rows]
        except KeyError as e:
            raise InputError(f"dataset {spec.source} has no field {e.args[0]!r}") from None
    return out, record


def build(cfg: WorldConfig, out_dir: str | Path) -> dict:
    """Write pretrain.txt, val.txt, people.jsonl and tasks/<task>/{train,dev,test}.jsonl."""
    if not cfg.tasks:
        raise InputError("config key 'world.tasks' is empty")
    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.source == "world":
            people = make_people(cfg)
            write_jsonl(tmp / "people.jsonl", people)
            (tmp / "pretrain.txt").write_text(corpus(cfg, people, cfg.corpus_chars, cfg.seed + 1))
            (tmp / "val.txt").write_text(corpus(cfg, people, cfg.val_chars, cfg.seed + 2))
        else:
            # the first val_chars of the corpus are held out for validation
            people, n = [], 0
            with open(tmp / "val.txt", "w") as val, open(tmp / "pretrain.txt", "w") as train:
                for text in iter_texts(cfg.source, cfg.text_field, cfg.corpus_chars + cfg.val_chars):
                    (val if n < cfg.val_chars else train).write(text + "\n")
                    n += len(text) + 1
        sizes, made = {}, {}
        for name, spec in sorted(cfg.tasks.items()):
            if spec.source != "world":
                splits, made[name] = hub_task(spec, cfg.seed)
            elif name == "T1":
                splits = qa_task(cfg, people)
            elif name in GENERATED_TASKS:
                rng = random.Random(f"{cfg.seed}-{name}")
                splits = _unique_examples(GENERATED_TASKS[name], rng,
                                          {"train": spec.n_train, "dev": spec.n_dev, "test": spec.n_test})
            else:
                raise InputError(f"unknown generated task {name!r} (T1, T2, T3 or a hub source)")
            for split, rows in splits.items():
                write_jsonl(tmp / "tasks" / name / f"{split}.jsonl", rows)
            sizes[name] = {k: len(v) for k, v in splits.items()}
        if made:  # how each hub task's splits were made (published or carved, with indices)
            (tmp / "task_splits.json").write_text(json.dumps(made, sort_keys=True))
    return sizes

