"""Shared CLI plumbing for `python -m methods.<slug> <step> ...`.

Bad input exits with one line on stderr naming the problem and status 2; the heavy imports
happen inside each step's function so that `--help` and argument errors are instant.

A DAG step's config (`config_step`) can be given three ways, so that one step is easy to rerun
by hand:

    --config '{"steps": 10, "train": {"lr": 0.001}}'    inline JSON (what the Snakemake rules pass)
    --config step.yaml                                   a YAML or JSON file (`.json`: parsed as JSON)
    --config @step.yaml                                  the same, explicitly a file

then `--set train.lr=3e-4 --set steps=20` (repeatable, applied in order) overrides keys; a value
is read as YAML (`3`, `3e-4`, `true`, `null`, `[1, 2]`, `{a: 1}`; anything else is a string) and
missing mappings on the way are created. The step still validates the merged config (its
`config.from_dict`), so a misspelt key fails there with its dotted path. `--print-config` prints
the merged config as the compact, key-sorted JSON a rule passes and exits 0 (the file options are
then optional). Every option has a help text: one added without it gets a generic one from its
name (`OPTION_HELP`, else its name, type and default); a step can pass better ones for its file
options (`config_step(..., helps={"data": "..."})`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

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
    message names the URL), into a one-line exit 2. A config step's `--config` and `--set` are
    merged first (`resolve_config`), so a step's function reads `args.config` as JSON whichever
    way it was given; with `--print-config` that JSON is printed and nothing runs."""
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
        if getattr(args, "config", None) is not None and hasattr(args, "set"):  # a config_step
            args.config = resolve_config(args.config, args.set or [])
            if args.print_config:
                print(_as_json(json.loads(args.config), "--config"))
                return 0
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
        from . import manifest  # data directories: checked against MANIFEST.json before, written after

        unverified = manifest.verify_inputs(args)
        func(args)
        manifest.after_step(args, unverified)
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


# Generic help of an option added without one, by its name (dashes and underscores alike). The
# direction (input/output) is said only where every rule agrees on it; `helps=` / `help=` of a
# step say more.
OPTION_HELP: dict[str, str] = {
    "out": "output: the file or directory this step writes (atomically)",
    "out_dir": "output directory of this step",
    "data": "input: the data this step reads (a file or directory an earlier step wrote; "
            "a hub dataset id where the paper scale names one)",
    "base": "input: the base model directory (saved model and tokenizer)",
    "model": "a model directory (or a hub model id at paper scale)",
    "models": "model directories",
    "tokenizer": "input: a tokenizer directory",
    "shards": "input: the token shards directory (train/ and val/, from `python -m methods.core shards`)",
    "checkpoint": "training checkpoint file: resumed when it exists, removed after the last step",
    "ckpt": "training checkpoint file: resumed when it exists, removed after the last step",
    "summary": "summary.json: the claims' metrics of the paper (what the claims rule reads)",
    "table": "the results table file",
    "figure": "output: the figure file",
    "metrics": "a metrics JSON file",
    "runs": "the result files of the runs",
    "evals": "the evaluation result files",
    "log_json": "output: the training log (JSON lines of metric rows)",
    "claims": "input: the paper's claims.yaml",
    "scale": "the scale: smoke, tiny or paper",
    "seed": "the run's seed (one of the scale file's seeds)",
    "name": "the run's name (a wildcard of the rule)",
    "variant": "the method variant of this run (a wildcard of the rule)",
    "policy": "the policy of this run (a wildcard of the rule)",
    "method": "the method of this run (a wildcard of the rule)",
    "lr": "the run's learning rate (a wildcard of the rule: one value of the scale file's grid)",
    "weight_decay": "the run's weight decay (a wildcard of the rule: one value of the scale file's grid)",
    "seq_len": "sequence length in tokens",
}


def _generic_help(name: str, kw: dict) -> str:
    """The help of an option added without one: OPTION_HELP's, else built from its name, its
    nargs, type, choices and default."""
    key = name.lstrip("-").replace("-", "_")
    text = OPTION_HELP.get(key)
    if text is None and key.startswith("fig_"):
        text = f"output: the figure file of the {key[4:].replace('_', ' ')}"
    if text is None:
        words = key.replace("_", " ")
        tp = kw.get("type")
        if kw.get("action") in ("store_true", "store_false"):
            text = f"flag: {words}"
        elif tp in (int, float):
            text = f"{words} ({'an integer' if tp is int else 'a number'})"
        elif kw.get("choices") is not None:
            text = words
        else:
            text = f"{words}: a path or value, as the step's rule (workflow/rules/) passes it"
    extra = []
    if kw.get("nargs") in ("+", "*"):
        extra.append("one or more" if kw["nargs"] == "+" else "zero or more")
    if kw.get("choices") is not None:
        extra.append("one of: " + ", ".join(map(str, kw["choices"])))
    default = kw.get("default")
    if default not in (None, False, [], "") and default is not argparse.SUPPRESS:
        extra.append(f"default: {default}")
    return "; ".join([text, *extra])


class StepParser(argparse.ArgumentParser):
    """The parser of a paper's CLI and of its steps (`subcommands`): an option added without a
    help text gets a generic one (`_generic_help`); with `--print-config` among a config step's
    arguments, only `--config` stays required."""

    def add_argument(self, *names, **kw):
        if kw.get("help") is None and names and names[0].startswith("-"):
            kw["help"] = _generic_help(max(names, key=len), kw)
        return super().add_argument(*names, **kw)

    def parse_known_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        if "--print-config" not in argv or not any(a.dest == "print_config" for a in self._actions):
            return super().parse_known_args(args, namespace)
        relaxed = [a for a in self._actions if a.required and a.dest != "config"]
        for a in relaxed:
            a.required = False
        try:
            return super().parse_known_args(args, namespace)
        finally:
            for a in relaxed:
                a.required = True


def subcommands(prog: str, description: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = StepParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="STEP",
                                help="the step to run (`<STEP> --help` lists its options)")
    return parser, sub


def config_step(sub: argparse._SubParsersAction, name: str, func: Callable, help: str,
                *files: str, threads: bool = False, helps: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """A DAG step's sub-command: `--config` (its section of the scale file: inline JSON, a
    YAML/JSON file or @file), repeatable `--set KEY=VALUE`, `--print-config`, one required
    `--<f>` per name in `files` (help text from `helps`, else generic), and `--threads` when the
    step runs torch."""
    s = sub.add_parser(name, help=help, description=help)
    s.set_defaults(func=func)
    s.add_argument("--config", required=True, metavar="JSON|FILE|@FILE",
                   help="the step's config section (of config/scales/<scale>.yaml): inline JSON, "
                        "or a YAML/JSON file, or @file")
    s.add_argument("--set", action="append", default=[], metavar="KEY.SUB=VALUE",
                   help="override one config key after --config (repeatable, in order); VALUE is "
                        "read as YAML: 3, 3e-4, true, null, [1, 2], {a: 1}, else a string")
    s.add_argument("--print-config", action="store_true",
                   help="print the merged config as the JSON a rule passes, and exit "
                        "(the file options are then optional)")
    for f in files:
        s.add_argument(f"--{f}", required=True, help=(helps or {}).get(f))
    if threads:
        add_threads(s)
    return s


# YAML 1.2 reads 1e-3 as a float; PyYAML (YAML 1.1) wants a dot (1.0e-3) and reads `1e-3` as a
# string, which a config's float field would then refuse. Step files and --set values are read
# with 1.2's exponent floats added.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_Loader: Any = None


def _yaml_load(text: str) -> Any:
    global _Loader
    import yaml

    if _Loader is None:
        class Loader(yaml.SafeLoader):
            pass

        Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
        _Loader = Loader
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def _as_json(obj: Any, where: str) -> str:
    """Compact, key-sorted JSON: the form the rules pass (`as_json` in workflow/rules/common.smk)."""
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InputError(f"{where}: not JSON-able ({e}); quote dates and other non-JSON values") from None


def _read_config_file(path: str, spec: str) -> Any:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError(f"--config {spec}: no such file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--config {spec}: cannot read: {e}") from None
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"--config {path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    try:
        return _yaml_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or " ".join(str(e).split())
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(f"--config {path}: invalid YAML{at}: {problem}") from None


def load_config(spec: str) -> tuple[Any, bool]:
    """`--config`'s value → (the config, whether it was inline JSON): `@file` is a file, text
    starting with `{` or `[` is inline JSON, an existing path is a file, else inline JSON."""
    s = spec.strip()
    if s.startswith("@"):
        return _read_config_file(s[1:], spec), False
    if not s.startswith(("{", "[")) and Path(s).is_file():
        return _read_config_file(s, spec), False
    try:
        return json.loads(s), True
    except json.JSONDecodeError as e:
        if s.startswith(("{", "[")):
            raise InputError(f"--config: invalid inline JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
        if Path(s).suffix.lower() in (".yaml", ".yml", ".json"):
            raise InputError(f"--config {spec}: no such file") from None
        short = spec if len(spec) <= 80 else spec[:77] + "..."
        raise InputError(f"--config {short!r}: neither inline JSON nor an existing file") from None


def _set_value(raw: str) -> Any:
    """A --set VALUE: YAML (with 1.2 floats); a date or other non-JSON scalar stays a string."""
    import yaml

    try:
        value = _yaml_load(raw)
    except yaml.YAMLError:
        return raw
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return raw
    return value


def apply_set(config: Any, item: str) -> None:
    """Apply one `--set KEY.SUB=VALUE` to `config` in place. Mappings missing on the way (or
    null) are created; an integer segment indexes an existing list item."""
    key, eq, raw = item.partition("=")
    key = key.strip()
    if not eq:
        raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.lr=3e-4")
    parts = key.split(".")
    if not key or "" in parts:
        raise InputError(f"--set {item!r}: empty key or key segment in {key!r}")
    value = _set_value(raw)
    node = config
    for i, part in enumerate(parts):
        here = ".".join(parts[:i + 1])
        last = i == len(parts) - 1
        if isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        elif isinstance(node, list):
            if not re.fullmatch(r"-?[0-9]+", part) or not -len(node) <= int(part) < len(node):
                raise InputError(f"--set {key}: '{here}' indexes a list of {len(node)} items")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        else:
            where = ".".join(parts[:i]) or "the config"
            raise InputError(f"--set {key}: '{where}' is {node!r}, not a mapping")


def resolve_config(spec: str, sets: list[str]) -> str:
    """A config step's `--config` (inline JSON, a YAML/JSON file, @file) with its `--set`
    overrides applied, as JSON. Inline JSON without overrides is passed on unchanged; otherwise
    the result is compact, key-sorted JSON."""
    config, inline = load_config(spec)
    if inline and not sets:
        return spec
    for item in sets:
        apply_set(config, item)
    return _as_json(config, f"--config {spec}" if not inline else "--config")


def add_threads(s: argparse.ArgumentParser, default: int = 1) -> None:
    """`--threads` (torch intra-op threads = the rule's cores) and `--runtime` (the scale's
    runtime spec as JSON: device, dtype policy, compile; see `runtime`) of a torch step."""
    s.add_argument("--threads", type=int, default=default, help="torch threads (the rule's cores)")
    s.add_argument("--runtime", default="", help="runtime spec JSON {device, dtype, master_fp32, "
                   "compile, seed, distributed}; empty = cpu/fp32")
