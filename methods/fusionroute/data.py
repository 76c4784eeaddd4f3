"""FusionRoute's generated domains (our tiny design), no torch.

    add   `Q:37+48=`        -> `85;`      addition
    rev   `Q:rev(kqzpa)=`   -> `apzqk;`   string reversal
    brk   `Q:close([{<=`    -> `>}]);`    closers of an open-bracket string (code-like)
    comp  `Q:rev(37+48)=`   -> `58;`      add then reverse: held out from the experts, seen by the router

Every answer ends with `;` (the stop token). Expert k is trained on `home_frac` of its own domain
and the rest split evenly over the other two expert domains; the router on all four, uniformly.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

from .config import DataConfig

EXPERT_DOMAINS = ("add", "rev", "brk")
DOMAINS = EXPERT_DOMAINS + ("comp",)
STOP = ";"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
OPEN, CLOSE = "([{<", ")]}>"


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(0, 10 ** rng.randint(1, digits) - 1)


def item(rng: random.Random, domain: str, cfg: DataConfig) -> dict:
    if domain in ("add", "comp"):
        a, b = _operand(rng, cfg.add_digits), _operand(rng, cfg.add_digits)
        s = str(a + b)
        if domain == "add":
            return {"domain": domain, "prompt": f"Q:{a}+{b}=", "answer": s + STOP}
        return {"domain": domain, "prompt": f"Q:rev({a}+{b})=", "answer": s[::-1] + STOP}
    if domain == "rev":
        w = "".join(rng.choice(LETTERS) for _ in range(rng.randint(cfg.rev_min, cfg.rev_max)))
        return {"domain": domain, "prompt": f"Q:rev({w})=", "answer": w[::-1] + STOP}
    if domain == "brk":
        w = "".join(rng.choice(OPEN) for _ in range(rng.randint(cfg.brk_min, cfg.brk_max)))
        closers = "".join(CLOSE[OPEN.index(c)] for c in reversed(w))
        return {"domain": domain, "prompt": f"Q:close({w}=", "answer": closers + ")" + STOP}
    raise ValueError(f"unknown domain {domain!r}")


def generate(cfg: DataConfig) -> tuple[list[dict], list[dict]]:
    """(train, test): n_train per domain, n_test per domain, test prompts disjoint from train."""
    rng = random.Random(cfg.seed)
    train = [item(rng, d, cfg) for d in DOMAINS for _ in range(cfg.n_train)]
    seen = {t["prompt"] for t in train}
    test = []
    for d in DOMAINS:
        got, tries = 0, 0
        while got < cfg.n_test:
            t = item(rng, d, cfg)
            tries += 1
            if t["prompt"] not in seen or tries > 100 * cfg.n_test:
                seen.add(t["prompt"])
                test.append(t)
                got += 1
    return train, test


def mixture(train: list[dict], weights: dict[str, float], n: int, seed: int) -> list[dict]:
    """n items drawn from `train` with domain probabilities `weights` (a pure function of seed)."""
    rng = random.Random(seed)
    by = {d: [t for t in train if t["domain"] == d] for d in weights}
    doms, w = zip(*[(d, p) for d, p in weights.items() if p > 0])
    return [rng.choice(by[d]) for d in rng.choices(doms, weights=w, k=n)]


def expert_weights(k: str, home_frac: float) -> dict[str, float]:
    rest = (1 - home_frac) / (len(EXPERT_DOMAINS) - 1)
    return {d: (home_frac if d == k else rest) for d in EXPERT_DOMAINS}


def router_weights() -> dict[str, float]:
    return {d: 1 / len(DOMAINS) for d in DOMAINS}


def corrupt(rng: random.Random, answer: str) -> str:
    """A wrong completion: one character of the body replaced by another of the same kind."""
    body = answer[:-1]
    i = rng.randrange(len(body))
    pool = "0123456789" if body[i].isdigit() else LETTERS if body[i].isalpha() else CLOSE
    c = rng.choice([x for x in pool if x != body[i]])
    return body[:i] + c + body[i + 1:] + STOP


def alphabet() -> str:
    return "".join(sorted(set("Q:=+();" + "revclos" + LETTERS + "0123456789" + OPEN + CLOSE)))


def build(cfg: DataConfig, out: str | Path) -> dict:
    """data/{train,test}.jsonl and the char tokenizer."""
    from methods.core.results import atomic_path, write_jsonl
    from methods.core.tokenizer import save_tokenizer, train_tokenizer

    train, test = generate(cfg)
    with atomic_path(out, is_dir=True) as tmp:
        write_jsonl(tmp / "train.jsonl", train)
        write_jsonl(tmp / "test.jsonl", test)
        (tmp / "data_config.json").write_text(json.dumps(asdict(cfg), indent=1))
        save_tokenizer(train_tokenizer([alphabet()], kind="char"), tmp / "tokenizer")
    return {"train": len(train), "test": len(test)}


# ---- reading what `build` wrote --------------------------------------------------------------
def load_tok(data_dir):
    """The char tokenizer saved by `build`."""
    from methods.core.tokenizer import load_tokenizer

    return load_tokenizer(Path(data_dir) / "tokenizer")


def saved_home_frac(data_dir) -> float:
    """The `home_frac` the data was built with (the experts' mixture uses it)."""
    from methods.core.results import read_json

    return read_json(Path(data_dir) / "data_config.json")["home_frac"]


def prompt_answer_pairs(items: list[dict]) -> list[tuple[str, str]]:
    return [(t["prompt"], t["answer"]) for t in items]


# ---- paper scale: the hub datasets (fusionroute.hub.datasets) ---------------------------------
def _reply(messages, where: str) -> str:
    """The last assistant turn of a chat-format list [{"role", "content"}, ...]."""
    from methods.core.results import InputError

    turns = [m.get("content") for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant"]
    if not turns or not isinstance(turns[-1], str):
        raise InputError(f"{where}: a record has no assistant turn in its messages")
    return turns[-1]


# SFT record formats, recognised from a split's columns: (name, columns, record -> (prompt, answer))
FORMATS = (
    ("gsm8k", ("question", "answer"), lambda r, w: (r["question"], r["answer"])),
    ("openmathinstruct2", ("problem", "generated_solution"), lambda r, w: (r["problem"], r["generated_solution"])),
    ("magicoder", ("problem", "solution"), lambda r, w: (r["problem"], r["solution"])),
    ("ultrafeedback_sft", ("prompt", "messages"), lambda r, w: (r["prompt"], _reply(r["messages"], w))),
)
PREF_COLUMNS = ("prompt", "chosen", "rejected")   # ultrafeedback_binarized train_prefs / test_prefs


def hub_rows(ds, n: int, seed: int) -> list[dict]:
    """`n` records of one hub dataset split, streamed (never the whole split in memory) through a
    seeded shuffle buffer; a missing split is a one-line error naming the splits it has."""
    import itertools

    import datasets

    from methods.core.data import dataset_splits
    from methods.core.results import InputError

    where = f"dataset {ds.id!r}" + (f" subset {ds.subset!r}" if ds.subset else "")
    splits = dataset_splits(ds.id, ds.subset)
    if ds.split not in splits:
        raise InputError(f"{where} has no split {ds.split!r} (has {sorted(splits)})")
    try:
        it = datasets.load_dataset(ds.id, ds.subset, split=ds.split, streaming=True)
        rows = list(itertools.islice(it.shuffle(seed=seed, buffer_size=10_000), n))
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot stream {where} split {ds.split!r}: {str(e).splitlines()[0]}") from None
    if not rows:
        raise InputError(f"{where} split {ds.split!r} is empty")
    return rows


def record_format(ds, row: dict):
    """The SFT format (FORMATS entry) of a hub dataset from its columns, or a one-line error."""
    from methods.core.results import InputError

    for f in FORMATS:
        if all(c in row for c in f[1]):
            return f
    raise InputError(f"dataset {ds.id!r} split {ds.split!r}: columns {sorted(row)} match no SFT format "
                     f"({', '.join(f'{n}: {list(c)}' for n, c, _ in FORMATS)})")


def pref_pairs(ds, n: int, seed: int) -> list[dict]:
    """`n` preference pairs {prompt, chosen, rejected} (the last assistant turns) of a prefs dataset."""
    from methods.core.results import InputError

    rows = hub_rows(ds, n, seed)
    if not all(c in rows[0] for c in PREF_COLUMNS):
        raise InputError(f"dataset {ds.id!r} split {ds.split!r} is not a preference dataset: columns "
                         f"{sorted(rows[0])} lack {[c for c in PREF_COLUMNS if c not in rows[0]]}")
    w = f"dataset {ds.id!r} split {ds.split!r}"
    return [{"prompt": r["prompt"], "chosen": _reply(r["chosen"], w), "rejected": _reply(r["rejected"], w)}
            for r in rows]


def build_hub(cfg: DataConfig, hub, out: str | Path) -> dict:
    """Paper scale: data/train.jsonl = `n_train` router SFT records per expert domain, split evenly
    over that domain's hub datasets ({domain, source, prompt, answer}); the preference pairs are
    read by the CDPO step itself. No tokenizer: every model uses the router base's."""
    from methods.core.results import InputError, atomic_path, write_jsonl

    sft = [d for d in hub.datasets if d.role != "prefs"]
    if not sft:
        raise InputError("fusionroute.hub.datasets names no SFT dataset (role add / rev / brk)")
    if not any(d.role == "prefs" for d in hub.datasets):
        raise InputError("fusionroute.hub.datasets names no preference dataset (role prefs) for CDPO")
    train, counts = [], {}
    for dom in EXPERT_DOMAINS:
        mine = [d for d in sft if d.role == dom]
        for i, ds in enumerate(mine):
            n = cfg.n_train // len(mine) + (i < cfg.n_train % len(mine))
            rows = hub_rows(ds, n, cfg.seed)
            name, _, get = record_format(ds, rows[0])
            w = f"dataset {ds.id!r} split {ds.split!r}"
            for r in rows:
                p, a = get(r, w)
                if isinstance(p, str) and isinstance(a, str) and p.strip() and a.strip():
                    train.append({"domain": dom, "source": ds.id, "format": name, "prompt": p, "answer": a})
            counts[f"{dom}:{ds.id}"] = len(rows)
    with atomic_path(out, is_dir=True) as tmp:
        write_jsonl(tmp / "train.jsonl", train)
        (tmp / "data_config.json").write_text(json.dumps(
            {**asdict(cfg), "hub_datasets": [asdict(d) for d in hub.datasets], "counts": counts}, indent=1))
    return {"train": len(train), **counts}
