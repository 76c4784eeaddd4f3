"""The paper-scale benchmarks of ASAG (arXiv 2606.15070, Sec. 4: GSM8K, MATH-500, AMC 2023, AIME
2024, AIME 2025, OlympiadBench, GPQA Diamond), read through `datasets` with their real subsets,
splits and field names, into one test file of {benchmark, id, question, answer, kind} rows.

HumanEval and LiveCodeBench (the paper's code benchmarks) are not read: scoring them needs
sandboxed execution of generated programs, which this harness does not do (README).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from methods.core.results import InputError, atomic_path


@dataclass(frozen=True)
class Bench:
    name: str
    subsets: tuple[str | None, ...]   # the dataset configs read (None: the default)
    split: str
    question: str                     # field of the problem text
    answer: str                       # field of the gold answer
    kind: str                         # math | choice
    local: str                        # directory name of a local copy (the stand-in's kind)


BENCHMARKS = {
    "openai/gsm8k": Bench("gsm8k", ("main",), "test", "question", "answer", "math", "gsm8k"),
    "HuggingFaceH4/MATH-500": Bench("math500", (None,), "test", "problem", "answer", "math", "math500"),
    "math-ai/amc23": Bench("amc23", (None,), "test", "question", "answer", "math", "amc23"),
    "HuggingFaceH4/aime_2024": Bench("aime24", (None,), "train", "problem", "answer", "math", "aime_h4"),
    "opencompass/AIME2025": Bench("aime25", ("AIME2025-I", "AIME2025-II"), "test", "question", "answer", "math",
                                  "aime2025_oc"),
    # the English, text-only, open-ended competition-math subset
    "Hothan/OlympiadBench": Bench("olympiadbench", ("OE_TO_maths_en_COMP",), "train", "question", "final_answer",
                                  "math", "olympiadbench"),
    "Idavidrein/gpqa": Bench("gpqa_diamond", ("gpqa_diamond",), "train", "Question", "Correct Answer", "choice",
                             "gpqa"),
}
GPQA_WRONG = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def bench_of(source: str) -> Bench:
    """The reader of a benchmark: by its hub id, or for a local copy (a directory laid out like the
    hub repository) by the directory's name."""
    if source in BENCHMARKS:
        return BENCHMARKS[source]
    p = Path(source)
    if p.is_dir():
        for b in BENCHMARKS.values():
            if p.name == b.local:
                return b
    raise InputError(f"benchmark {source!r} has no reader (known: {sorted(BENCHMARKS)})")


def _load(source: str, subset: str | None, split: str):
    import datasets

    try:
        return datasets.load_dataset(source, subset, split=split)
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot load benchmark {source!r} subset {subset!r} split {split!r}: "
                         f"{str(e).splitlines()[0]}") from None


def gold_of(b: Bench, r: dict) -> str:
    a = r[b.answer]
    if b.name == "gsm8k":                        # "... #### 72"
        return str(a).split("####")[-1].strip().replace(",", "")
    if isinstance(a, list):                      # OlympiadBench: a list of final answers
        return str(a[0]).strip().strip("$").strip() if a else ""
    if isinstance(a, float) and a.is_integer():  # AMC 2023 stores numbers as floats
        return str(int(a))
    return str(a).strip()


def records(source: str, seed: int) -> list[dict]:
    """{benchmark, id, question, answer, kind} rows of one benchmark (a hub id or a local copy);
    GPQA's four options are shuffled per question (seeded) and lettered A–D."""
    b = bench_of(source)
    hub_id = source
    out = []
    for subset in b.subsets:
        ds = _load(source, subset, b.split)
        need = [b.question, b.answer] + (list(GPQA_WRONG) if b.kind == "choice" else [])
        missing = [f for f in need if f not in ds.column_names]
        if missing:
            raise InputError(f"benchmark {hub_id!r} ({source}) subset {subset!r} has no field(s) {missing} "
                             f"(has {ds.column_names})")
        for i, r in enumerate(ds):
            q, gold = str(r[b.question]).strip(), gold_of(b, r)
            if b.kind == "choice":
                opts = [str(r[b.answer]).strip()] + [str(r[k]).strip() for k in GPQA_WRONG]
                order = list(range(4))
                random.Random(f"{seed}-{b.name}-{subset}-{i}").shuffle(order)
                letters = "ABCD"
                q = q + "\n\n" + "\n".join(f"{letters[j]}) {opts[o]}" for j, o in enumerate(order))
                q += "\n\nPut the letter of the correct option in the box."
                gold = letters[order.index(0)]
            out.append({"benchmark": b.name, "id": f"{subset or 'default'}/{i}", "question": q, "answer": gold,
                        "kind": b.kind})
    if not out:
        raise InputError(f"benchmark {hub_id!r} ({source}) has no rows")
    return out


def build(benchmarks: list[str], out_dir: str | Path, seed: int, extra: dict) -> dict:
    """test.jsonl of every benchmark (in the config's order) and config.json."""
    if not benchmarks:
        raise InputError("config key 'paper.benchmarks' is empty")
    rows = []
    for src in benchmarks:
        rows += records(src, seed)
    with atomic_path(out_dir, is_dir=True) as tmp:
        (tmp / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tmp / "config.json").write_text(json.dumps({"benchmarks": benchmarks, **extra}))
    counts = {}
    for r in rows:
        counts[r["benchmark"]] = counts.get(r["benchmark"], 0) + 1
    return counts

