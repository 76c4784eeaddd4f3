"""Shared CLI plumbing for `python -m methods.<slug> <step> ...`.

Bad input exits with one line on stderr naming the problem and status 2; the heavy imports
happen inside each step's function so that `--help` and argument errors are instant.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

from .results import InputError


def set_threads(n: int) -> None:
    """One torch thread per Snakemake core (CONVENTIONS 14)."""
    import torch

    torch.set_num_threads(max(1, n))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse argv; call the sub-command's `func(args)`; turn InputError into a one-line exit 2."""
    args = parser.parse_args(argv)
    func: Callable | None = getattr(args, "func", None)
    if func is None:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: a sub-command is required", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        func(args)
    except InputError as e:
        print(f"{parser.prog} {args.command}: error: {e}", file=sys.stderr)
        return 2
    print(f"{parser.prog} {args.command}: done in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


def subcommands(prog: str, description: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="STEP")
    return parser, sub


def config_step(sub: argparse._SubParsersAction, name: str, func: Callable, help: str,
                *files: str, threads: bool = False) -> argparse.ArgumentParser:
    """A DAG step's sub-command: `--config` (its section of the scale file, as JSON), one
    required `--<f>` per name in `files`, and `--threads` when the step runs torch."""
    s = sub.add_parser(name, help=help)
    s.set_defaults(func=func)
    s.add_argument("--config", required=True, help="the step's config section as JSON")
    for f in files:
        s.add_argument(f"--{f}", required=True)
    if threads:
        s.add_argument("--threads", type=int, default=1)
    return s
