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

from .llm import LLMError
from .results import InputError


def set_threads(n: int) -> None:
    """One torch thread per Snakemake core (parallelism comes from jobs side by side); under torchrun the job's cores are
    shared by the ranks of this node (LOCAL_WORLD_SIZE)."""
    import torch

    torch.set_num_threads(max(1, n // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse argv; call the sub-command's `func(args)`; turn InputError, and an LLM endpoint's
    failure (`llm.LLMError`: unreachable, HTTP 4xx, retries spent on 5xx, a malformed answer; its
    message names the URL), into a one-line exit 2."""
    args = parser.parse_args(argv)
    func: Callable | None = getattr(args, "func", None)
    if func is None:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: a sub-command is required", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    where = ""
    dist = None
    try:
        if getattr(args, "runtime", None) is not None:
            from . import distributed, runtime

            rt = runtime.activate(args.runtime)
            # a torchrun worker joins its process group and takes GPU LOCAL_RANK; a plain
            # launch has none (see `distributed`)
            if distributed.launched():
                dist = distributed
                dist.init()
                rt = runtime.current()
                where = f" as rank {dist.rank()}/{dist.world_size()}"
            where = f" on {rt.device} ({str(rt.compute_dtype).removeprefix('torch.')})" + where
        func(args)
    except InputError as e:
        print(f"{parser.prog} {args.command}: error: {e}", file=sys.stderr)
        return 2
    except LLMError as e:
        print(f"{parser.prog} {args.command}: error: LLM endpoint: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    finally:
        if dist is not None:
            dist.shutdown()
    print(f"{parser.prog} {args.command}: done in {time.perf_counter() - t0:.1f}s{where}", file=sys.stderr)
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
        add_threads(s)
    return s


def add_threads(s: argparse.ArgumentParser, default: int = 1) -> None:
    """`--threads` (torch intra-op threads = the rule's cores) and `--runtime` (the scale's
    runtime spec as JSON: device, dtype policy, compile; see `runtime`) of a torch step."""
    s.add_argument("--threads", type=int, default=default, help="torch threads (the rule's cores)")
    s.add_argument("--runtime", default="", help="runtime spec JSON {device, dtype, master_fp32, "
                   "compile, seed, distributed}; empty = cpu/fp32")
