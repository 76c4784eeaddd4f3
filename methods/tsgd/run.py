"""DAG steps of the TSGD study: data, baselines, one TSGD variant, aggregate."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from methods.core.config import from_json
from methods.core.results import InputError, read_jsonl, write_json, write_jsonl

from .config import Config, DataConfig, VariantConfig
from .synth import SynthConfig


def study(cfg_json: str) -> Config:
    """The `tsgd:` section, every key checked (methods/tsgd/config.py)."""
    return from_json(Config, cfg_json, "tsgd")


def build_data(cfg_json: str, out: str) -> dict:
    s = study(cfg_json)
    d = s.data
    if d.source == "synthetic":
        from .synth import generate

        data = generate(SynthConfig(d.n_train, d.n_val, d.n_test, d.n_types, d.seed))
    elif d.source == "hub":
        data = _hub_data(d)
    else:
        raise InputError(f"tsgd.data.source: expected synthetic or hub, got {d.source!r}")
    for split, rows in data.items():
        write_jsonl(Path(out) / f"{split}.jsonl", rows)
    return {k: len(v) for k, v in data.items()}


def _hub_data(d: DataConfig) -> dict:
    """MATH train problems (every subject config of `train_hub`, answers = the last \\boxed{} of the
    reference solution) shuffled into n_train + n_val; the test sets of `test_hubs` (n_test of
    them, a seeded subset when fewer than all are asked for)."""
    import random
    import sys

    import datasets

    from .answer import last_boxed

    def load(hub_id, subset, split):
        try:
            return datasets.load_dataset(hub_id, subset, split=split)
        except Exception as e:  # the hub client raises many types; one line is what the user needs
            raise InputError(f"cannot load dataset {hub_id!r} config {subset!r} split {split!r}: "
                             f"{str(e).splitlines()[0]}") from None

    try:
        subjects = datasets.get_dataset_config_names(d.train_hub)
    except Exception as e:
        raise InputError(f"cannot list the configs of dataset {d.train_hub!r}: {str(e).splitlines()[0]}") from None
    rows, dropped = [], 0
    for sub in subjects:
        for i, r in enumerate(load(d.train_hub, sub, "train")):
            ans = last_boxed(r["solution"])
            if not ans:  # no \boxed{} answer to score against: not a usable training problem
                dropped += 1
                continue
            rows.append({"id": f"{sub}{i}", "type": sub, "question": r["problem"], "answer": ans})
    if len(rows) < d.n_train + d.n_val:
        raise InputError(f"tsgd.data: {d.train_hub} has {len(rows)} train problems with a boxed answer, "
                         f"fewer than n_train + n_val = {d.n_train + d.n_val}")
    random.Random(d.seed).shuffle(rows)
    train, val = rows[:d.n_train], rows[d.n_train:d.n_train + d.n_val]
    test = []
    for spec in d.test_hubs:
        ds = load(spec.id, None, spec.split)
        for field in (spec.question, spec.answer):
            if field not in ds.column_names:
                raise InputError(f"tsgd.data.test_hubs {spec.name}: {spec.id} split {spec.split!r} "
                                 f"has no field {field!r} (fields: {ds.column_names})")
        for i, r in enumerate(ds):
            test.append({"id": f"{spec.name}{i}", "type": spec.name,
                         "question": r[spec.question], "answer": str(r[spec.answer])})
    if d.n_test < len(test):
        keep = sorted(random.Random(d.seed + 1).sample(range(len(test)), d.n_test))
        test = [test[i] for i in keep]
    print(f"hub data: {len(train)} train, {len(val)} val, {len(test)} test "
          f"({dropped} train problems without a boxed answer dropped)", file=sys.stderr)
    return {"train": train, "val": val, "test": test}


def load_split(data_dir: str, split: str) -> list[dict]:
    p = Path(data_dir) / f"{split}.jsonl"
    if not p.is_file():
        raise InputError(f"missing data file {p}")
    return read_jsonl(p)


def make_agent(s: Config, data_dir: str, variant: VariantConfig | None, need_retriever: bool):
    """The agent of one run: the optimiser settings (tsgd.tsgd) with a variant's capacity and
    verification (the baselines: no budget, no verification)."""
    from .optim import Agent, Retriever, TSGDConfig, make_embed
    from .sim import SimReflector, SimSolver, classify

    lc = s.llm
    cfg = TSGDConfig(**dataclasses.asdict(s.tsgd), capacity=variant.capacity if variant else None,
                     verify=variant.verify if variant else "none")
    classify_fn = None
    if lc.kind == "sim":
        index = {r["question"]: r for sp in ("train", "val", "test") for r in load_split(data_dir, sp)}
        solver = SimSolver(lc.sim_solver, index, lc.seed)
        reflector = SimReflector(lc.sim_reflector, index)
        classify_fn = lambda r: classify(r, index, solver.book)  # noqa: E731
    elif lc.kind == "endpoint":
        from methods.core.llm import make_llm

        if len(lc.endpoints) != 2:
            raise InputError("tsgd.llm.endpoints: expected [solver spec, reflector spec] with kind endpoint")
        solver, reflector = make_llm(lc.endpoints[0]), make_llm(lc.endpoints[1])
    else:
        raise InputError(f"tsgd.llm.kind: expected sim or endpoint, got {lc.kind!r}")
    ret = Retriever(lambda: make_embed(s.embedder), lazy=True) if need_retriever else None
    return Agent(solver, reflector, ret, cfg), classify_fn


def baselines(cfg_json: str, data_dir: str, out: str, curve_csv: str) -> dict:
    import csv
    import io

    from .library import Library
    from .optim import static_rag

    s = study(cfg_json)
    t0 = time.perf_counter()
    agent, _ = make_agent(s, data_dir, None, need_retriever=True)
    train, test = load_split(data_dir, "train"), load_split(data_dir, "test")
    zs, zs_ok = agent.accuracy(test, Library(None))
    cps = [c for c in s.rag.checkpoints if c <= len(train)]
    if not cps:
        raise InputError("tsgd.rag.checkpoints: none is <= the number of training problems")
    curve, rag_ok = static_rag(agent, train, test, s.rag.k, cps, s.rag.seed)
    buf = io.StringIO()
    w = csv.DictWriter(buf, ["memory_size", "test_acc"])
    w.writeheader()
    w.writerows(curve)
    from methods.core.results import write_text

    write_text(curve_csv, buf.getvalue())
    res = {"zero_shot_test_acc": zs, "rag_curve": curve, "zero_shot_test_ok": [bool(x) for x in zs_ok],
           "rag_final_test_ok": rag_ok, "n_solver_calls": agent.n_solver_calls,
           "wall_s": time.perf_counter() - t0}
    write_json(out, res)
    return res


def train_variant(cfg_json: str, variant: str, data_dir: str, out: str, trace_csv: str) -> dict:
    import csv
    import io

    from methods.core.results import write_text

    from .optim import train_tsgd

    s = study(cfg_json)
    if variant not in s.variants:
        raise InputError(f"tsgd.variants: no variant {variant!r} (have {sorted(s.variants)})")
    v = s.variants[variant]
    t0 = time.perf_counter()
    need_ret = v.capacity is None or v.capacity > s.tsgd.max_full_context
    agent, classify_fn = make_agent(s, data_dir, v, need_retriever=need_ret)
    train, val, test = (load_split(data_dir, sp) for sp in ("train", "val", "test"))
    r = train_tsgd(agent, train, val, classify_fn)
    test_acc, test_ok = agent.accuracy(test, r["library"])
    final_test_acc, _ = agent.accuracy(test, r["final"])
    kinds = [classify_fn(x)[0] for x in r["library"].rules] if classify_fn else []
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(r["trace"][0]))
    w.writeheader()
    w.writerows(r["trace"])
    write_text(trace_csv, buf.getvalue())
    res = {"variant": variant, **dataclasses.asdict(v), "test_acc": test_acc, "test_ok": [bool(x) for x in test_ok],
           "final_test_acc": final_test_acc,
           "best_val_acc": r["best_val_acc"], "best_step": r["best_step"], "max_size": r["max_size"],
           "library": r["library"].to_json(), "final_library": r["final"].to_json(),
           "library_kinds": kinds, "ops": r["ops"], "n_solver_calls": agent.n_solver_calls,
           "wall_s": time.perf_counter() - t0}
    write_json(out, res)
    return res
