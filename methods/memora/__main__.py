"""CLI of the Memora study: one sub-command per DAG step.

    python -m methods.memora <step> --config '<json>' [files...]

`--config` is the `memora:` section of `config/scales/<scale>.yaml`.
"""
from __future__ import annotations

import functools
import json
import sys

from methods.core import cli
from methods.core.results import InputError


def _cfg(a) -> dict:
    try:
        cfg = json.loads(a.config)
    except json.JSONDecodeError as e:
        raise InputError(f"config is not valid JSON: {e}") from None
    from .run import parse

    parse(cfg)  # validate every key up front (one-line error naming it)
    return cfg


def _data(a):
    from .run import step_data
    print(f"data: {step_data(_cfg(a), a.out)}", file=sys.stderr)


def _embed(a):
    from .run import step_embed
    print(f"embed: {step_embed(_cfg(a), a.data, a.out)}", file=sys.stderr)


def _build(a):
    from .run import step_build
    print(f"build: {step_build(_cfg(a), a.store, a.data, a.emb, a.out)}", file=sys.stderr)


def _retrieve(a):
    from .run import step_retrieve
    print(f"retrieve: {step_retrieve(_cfg(a), a.store, a.policy, a.data, a.emb, a.built, a.out)}", file=sys.stderr)


def _answer(a):
    from .run import step_answer
    print(f"answer: {step_answer(_cfg(a), a.store, a.policy, a.data, a.built, a.ret, a.out)}", file=sys.stderr)


def _judge(a):
    from .run import step_judge
    print(f"judge: {step_judge(_cfg(a), a.data, a.answers, a.out)}", file=sys.stderr)


def _theory(a):
    from .run import step_theory
    print(f"theory: {step_theory(_cfg(a), a.data, a.emb, a.out)}", file=sys.stderr)


def _aggregate(a):
    from .run import step_aggregate
    print(f"aggregate: {step_aggregate(_cfg(a), a.runs, a.builds, a.theory, a.table, a.summary, a.figure, a.judged)}",
          file=sys.stderr)


def build_parser():
    p, sub = cli.subcommands("memora", __doc__.splitlines()[0])
    step = functools.partial(cli.config_step, sub)
    s = step("data", _data, "generate LoCoMo-lite (or load LoCoMo / LongMemEval)", "out")
    s.set_defaults(writes_data="out")  # a data directory: cli writes its MANIFEST.json
    step("embed", _embed, "embedding cache of every text known up front", "data", "out")
    s = step("build", _build, "build one store (rag, factstore, memora, memora_noanchor)", "data", "emb", "out")
    s.add_argument("--store", required=True)
    s = step("retrieve", _retrieve, "retrieve for every question with one store and policy",
             "data", "emb", "built", "out")
    s.add_argument("--store", required=True)
    s.add_argument("--policy", required=True)
    s = step("answer", _answer, "answer every question from one run's retrieved memories (memora.qa.answer)",
             "data", "built", "ret", "out")
    s.add_argument("--store", required=True)
    s.add_argument("--policy", required=True)
    step("judge", _judge, "LLM-judge labels of one run's answers against the gold answers (memora.qa.judge)",
         "data", "answers", "out")
    step("theory", _theory, "Theorem D.1: Memora reduced to flat RAG equals RAG", "data", "emb", "out")
    s = step("aggregate", _aggregate, "metrics table, claim metrics, figure", "theory", "table", "summary", "figure")
    s.add_argument("--runs", nargs="+", required=True)
    s.add_argument("--builds", nargs="+", required=True)
    s.add_argument("--judged", nargs="*", default=[], help="judged answers (memora.qa set)")
    return p


if __name__ == "__main__":
    sys.exit(cli.main(build_parser()))
