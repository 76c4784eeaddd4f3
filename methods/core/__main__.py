"""Shared DAG steps: `python -m methods.core <step> ...` (tokenizer training, claim verdicts).
The HTML report has its own entry point: `python -m methods.core.report`."""
from __future__ import annotations

import sys
from pathlib import Path

from . import cli
from .results import InputError


def _tokenizer(a):
    from .tokenizer import save_tokenizer, train_tokenizer

    texts = []
    for f in a.texts:
        p = Path(f)
        if not p.is_file():
            raise InputError(f"missing input file: {p}")
        if p.suffix == ".jsonl":
            from .results import read_jsonl

            texts += [r["prompt"] + r["answer"] for r in read_jsonl(p)]
        else:
            texts += p.read_text().splitlines(keepends=True)
    save_tokenizer(train_tokenizer(texts, a.kind, a.vocab_size), a.out)


def _claims(a):
    from .claims import evaluate_claims, load_claims
    from .results import provenance, read_json, write_json

    spec = load_claims(a.claims)
    metrics = read_json(a.metrics)
    table = evaluate_claims(spec, metrics, a.scale)
    table["provenance"] = metrics.get("provenance") or provenance()
    write_json(a.out, table)
    print("claims: " + ", ".join(f"{r['id']} {r['verdict']}" for r in table["claims"]), file=sys.stderr)


def build_parser():
    p, sub = cli.subcommands("core", __doc__.splitlines()[0])
    s = sub.add_parser("tokenizer", help="train a tokenizer on text / JSONL files, save in HF format")
    s.set_defaults(func=_tokenizer)
    s.add_argument("--texts", nargs="+", required=True)
    s.add_argument("--kind", choices=["char", "bpe"], required=True)
    s.add_argument("--vocab-size", type=int, default=0)
    s.add_argument("--out", required=True)
    s = sub.add_parser("claims", help="evaluate a paper's claims.yaml against its summary metrics")
    s.set_defaults(func=_claims)
    for k in ("claims", "metrics", "scale", "out"):
        s.add_argument(f"--{k}", required=True)
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
