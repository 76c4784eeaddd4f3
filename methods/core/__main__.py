"""Shared DAG steps: `python -m methods.core <step> ...` (tokenizer training, token shards, claim verdicts,
the READMEs' generated results tables, the scale files' JSON schema).
The HTML report has its own entry point: `python -m methods.core.report`."""
from __future__ import annotations

import sys
from pathlib import Path

from . import cli
from .results import InputError


def _tokenizer(a):
    from .tokenizer import save_tokenizer, train_tokenizer

    for f in a.texts:
        if not Path(f).is_file():
            raise InputError(f"missing input file: {f}")

    def texts():
        # a generator, line by line: a paper-scale corpus file is far larger than memory
        for f in map(Path, a.texts):
            if f.suffix == ".jsonl":
                from .results import read_jsonl

                yield from (r["prompt"] + r["answer"] for r in read_jsonl(f))
            else:
                with open(f, encoding="utf-8") as fh:
                    yield from fh

    save_tokenizer(train_tokenizer(texts(), a.kind, a.vocab_size), a.out)


def _shards(a):
    from .data import stream_texts
    from .shards import write_corpus_shards
    from .tokenizer import load_tokenizer

    if a.val_source is None and a.val_tokens is None:
        raise InputError("shards: --val-tokens is required without --val-source (val is cut from --source)")
    tok = load_tokenizer(a.tokenizer)
    # a .txt file is one continuous text read in lines, its newlines kept: they already
    # separate its documents, and tokenizing it line by line then gives the ids of the whole
    # text (exactly so for the char tokenizer). Documents of a record source end with EOS.
    eos = {"yes": True, "no": False, "auto": Path(a.source).suffix != ".txt"}[a.eos]
    val_texts = None if a.val_source is None else stream_texts(a.val_source, a.text_field, a.val_split)
    idx = write_corpus_shards(stream_texts(a.source, a.text_field, a.split), tok, a.out,
                              val_tokens=a.val_tokens, train_tokens=a.train_tokens, val_texts=val_texts,
                              shard_tokens=a.shard_tokens, append_eos=eos)
    print("shards: " + ", ".join(f"{k} {v['total_tokens']:,} tokens in {len(v['shards'])} shard(s) ({v['dtype']})"
                                 for k, v in idx.items()), file=sys.stderr)


def _claims(a):
    from .claims import evaluate_claims, load_claims
    from .results import InputError, provenance, read_json, write_json
    from .sequential import look_level

    spec = load_claims(a.claims)
    metrics = read_json(a.metrics)
    look, level = None, 0.95
    if a.looks is not None:
        looks = [int(x) for x in a.looks.split(",")]
        level = look_level(looks, a.look)
        look = {"index": a.look, "looks": looks, "seeds": looks[a.look]}
    try:
        table = evaluate_claims(spec, metrics, a.scale, level=level, look=look)
    except InputError as e:
        raise InputError(f"{a.metrics}: {e}") from None
    table["provenance"] = metrics.get("provenance") or provenance()
    write_json(a.out, table)
    print("claims: " + ", ".join(f"{r['id']} {r['verdict']}" for r in table["claims"]), file=sys.stderr)


def _readme(a):
    from .readme import main

    main(a)


def _schema(a):
    import json

    from .config import scale_schema
    from .registry import papers
    from .results import atomic_path

    text = json.dumps(scale_schema(papers(a.root), a.root), indent=1) + "\n"
    if a.out is None:
        sys.stdout.write(text)
        return
    with atomic_path(a.out) as tmp:
        Path(tmp).write_text(text)


def build_parser():
    p, sub = cli.subcommands("core", __doc__.splitlines()[0])
    s = sub.add_parser("tokenizer", help="train a tokenizer on text / JSONL files, save in HF format")
    s.set_defaults(func=_tokenizer)
    s.add_argument("--texts", nargs="+", required=True)
    s.add_argument("--kind", choices=["char", "bpe"], required=True)
    s.add_argument("--vocab-size", type=int, default=0)
    s.add_argument("--out", required=True)
    s = sub.add_parser("shards", help="tokenize a corpus (streamed) into train/val token shards")
    s.set_defaults(func=_shards)
    s.add_argument("--source", required=True, help="a .txt / JSONL file, a save_to_disk directory or a hub id")
    s.add_argument("--text-field", default="text", help="the text column of a record source")
    s.add_argument("--split", default="train", help="the split of a dataset source")
    s.add_argument("--val-source", help="held-out text for val (default: the start of --source)")
    s.add_argument("--val-split", default="train", help="the split of a dataset --val-source")
    s.add_argument("--tokenizer", required=True, help="a tokenizer directory or hub id")
    s.add_argument("--val-tokens", type=int, help="val tokens (default with --val-source: all of it)")
    s.add_argument("--train-tokens", type=int, help="train tokens (default: the rest of the source)")
    s.add_argument("--shard-tokens", type=int, default=2 ** 24)
    s.add_argument("--eos", choices=["auto", "yes", "no"], default="auto",
                   help="EOS after each document (auto: yes unless --source is a .txt file)")
    s.add_argument("--out", required=True, help="the directory that receives val/ and train/")
    s = sub.add_parser("claims", help="evaluate a paper's claims.yaml against its summary metrics")
    s.set_defaults(func=_claims)
    for k in ("claims", "metrics", "scale", "out"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--looks", help="the paper's planned looks, seeds after each (e.g. 3,5,8,12): the "
                                   "interval's level is this look's share of the error (methods.core.sequential)")
    s.add_argument("--look", type=int, default=0, help="which look (0-based) this summary is")
    s = sub.add_parser("readme", help="fill the results tables in the papers' READMEs from results/<scale>")
    s.set_defaults(func=_readme)
    s.add_argument("--scale", required=True)
    s.add_argument("--results", default="results", help="the results directory")
    s.add_argument("--root", default=".", help="the repository root")
    s.add_argument("--papers", nargs="+", help="only these papers (default: all registered)")
    s.add_argument("--check", action="store_true", help="change nothing; fail when a table is out of date")
    s = sub.add_parser("schema", help="print the JSON schema of a scale file, generated from the papers' "
                                      "config dataclasses (methods/<paper>/config.py)")
    s.set_defaults(func=_schema)
    s.add_argument("--root", default=".", help="the repository root")
    s.add_argument("--out", help="write to this file instead of standard output")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
