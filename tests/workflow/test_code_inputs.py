"""Every rule lists, as inputs, every source file its step can import, so
editing a module reruns exactly the steps that can import it.

The inputs come from `code(entry, step)` in workflow/rules/common.smk, which computes them with
`ast` (methods/core/codeinputs.py). The check here is independent of that: the rules, their
commands and their inputs are read from the smoke and paper dry runs (`snakemake -n -p`, which
together plan every rule); the sub-command's function is found by building the step's real
argparse parser and reading its `func` default; the modules a piece of code imports are read
from the compiled bytecode (`IMPORT_NAME` with its level and from-list), resolved and loaded
by the import system itself (importlib, `module.__file__`). As in the helper, the step's own
function counts in `__main__` (with the module functions it names and what runs on every
invocation), and every other imported module counts whole, functions included.
"""
from __future__ import annotations

import argparse
import dis
import functools
import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

from .conftest import ROOT, snakemake

ROOTS = ("methods", "kernels")
STEP = re.compile(r"-m methods\.([\w.]+)(?: ([A-Za-z][\w-]*))?")
# the one-node multi-GPU launcher in front of a step (`launcher` in workflow/rules/common.smk)
LAUNCHER = re.compile(r"-m methods\.core\.distributed --nproc-per-node \d+ ")


# ---- the rules, their steps and their inputs, as Snakemake plans them ----------------------
def _jobs(dry_run: str) -> dict[str, tuple[str, str | None, frozenset[str]]]:
    """{rule: (entry, sub-command, code inputs)} of a `snakemake -n -p` output (jobs of a group,
    e.g. a served model and its consumers, are printed indented)."""
    out, rule, inputs = {}, None, frozenset()
    for line in (raw.strip() for raw in dry_run.splitlines()):
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line)
        if m:
            rule, inputs = m.group(1), frozenset()
        elif rule and line.startswith("input: "):
            inputs = frozenset(f for f in line.split(": ", 1)[1].split(", ")
                               if f.startswith(ROOTS) and f.endswith(".py"))
        elif rule and line.startswith("Shell command:"):
            if rule == "all":  # the target rule runs nothing
                rule = None
                continue
            step = STEP.search(LAUNCHER.sub("", line))
            assert step, f"{rule}: no `-m methods.<entry> <step>` in {line[:200]}"
            got = (step.group(1), step.group(2), inputs)
            assert out.setdefault(rule, got) == got, f"{rule}: jobs differ in their step or code inputs"
            rule = None
    return out


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> dict[str, tuple[str, str | None, frozenset[str]]]:
    base = tmp_path_factory.mktemp("codeinputs")
    found = {}
    for scale in ("smoke", "paper"):
        out = snakemake("-n", "-p", config={"scale": scale, "results_dir": base / "r", "reports_dir": base / "p"})
        found.update(_jobs(out.stdout))
    every = {l.split()[0] for l in snakemake("--list-rules").stdout.splitlines() if l and not l[0].isspace()}
    missing = every - set(found) - {"all"}
    assert not missing, f"rules planned at neither smoke nor paper scale: {sorted(missing)}"
    return found


# ---- independent ground truth: bytecode imports, resolved by the import system -------------
def _code_objects(code: types.CodeType, functions: bool = True):
    """`code` and its nested code objects (with functions=False: class bodies and
    comprehensions only, i.e. what runs when the module itself runs)."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and (functions or c.co_name.startswith("<") or not c.co_flags & 0x2):
            yield from _code_objects(c, functions)


def _bytecode_imports(code: types.CodeType, package: str, functions: bool = True) -> set[str]:
    """Absolute names of the repository modules the code's IMPORT_NAME ops import, as the
    import system resolves them (`from X import y` imports the module X.y where one exists)."""
    out = set()
    for co in _code_objects(code, functions):
        ins = list(dis.get_instructions(co))
        for i, op in enumerate(ins):
            if op.opname != "IMPORT_NAME":
                continue
            assert ins[i - 2].opname == ins[i - 1].opname == "LOAD_CONST", (co, op)
            level, fromlist = ins[i - 2].argval, ins[i - 1].argval
            name = importlib.util.resolve_name("." * level + op.argval, package) if level else op.argval
            if name.split(".")[0] not in ROOTS:
                continue
            parts = name.split(".")
            out |= {".".join(parts[:k]) for k in range(1, len(parts) + 1)}  # packages run first
            mod = importlib.import_module(name)
            for attr in fromlist or ():
                if attr == "*":
                    continue
                if isinstance(getattr(mod, attr, None), types.ModuleType):
                    out.add(getattr(mod, attr).__name__)
                elif hasattr(mod, "__path__") and importlib.util.find_spec(f"{name}.{attr}") is not None:
                    # a package's submodule not loaded yet (the import system would load it)
                    out.add(f"{name}.{attr}")
    return out


@functools.cache
def _module_imports(name: str) -> frozenset[str]:
    return frozenset(_bytecode_imports(*_module_code(name)))


def _module_code(name: str) -> tuple[types.CodeType, str]:
    mod = importlib.import_module(name)
    path = Path(mod.__file__)
    return compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__package__


def _step_function(entry: str, sub: str):
    """The function the step's real parser dispatches `sub` to."""
    main = importlib.import_module(f"methods.{entry}.__main__")
    parser = main.build_parser()
    (subs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert sub in subs.choices, f"methods.{entry} has no sub-command {sub!r}"
    return main, subs.choices[sub].get_default("func")


def _functions_named(func, main) -> list[types.FunctionType]:
    """`func` and the functions of __main__ it names, transitively (helpers like `_cfg`); a
    class of __main__ it names brings all its methods."""
    def own(n):
        g = main.__dict__.get(n)
        if isinstance(g, types.FunctionType) and g.__module__ == main.__name__:
            return [g]
        if isinstance(g, type) and g.__module__ == main.__name__:
            return [v for v in vars(g).values() if isinstance(v, types.FunctionType)]
        return []

    seen, todo = [], [func]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.append(f)
        for co in _code_objects(f.__code__):
            todo += [g for n in co.co_names for g in own(n)]
    return seen


@functools.cache
def imported_files(entry: str, sub: str | None) -> frozenset[str]:
    """Every repository file `python -m methods.<entry> <sub>` can import."""
    spec = importlib.util.find_spec(f"methods.{entry}")
    if sub is None:  # a module run as a script (core.report): all of it runs
        run = f"methods.{entry}"
        code, package = _module_code(run)
        names = _bytecode_imports(code, package)
    else:
        assert spec.submodule_search_locations, f"methods.{entry} is not a package with a __main__"
        run = f"methods.{entry}.__main__"
        main, func = _step_function(entry, sub)
        code, package = _module_code(run)
        names = _bytecode_imports(code, package, functions=False)   # module level
        names |= _bytecode_imports(main.build_parser.__code__, package)  # runs on every call
        for f in _functions_named(func, main):
            names |= _bytecode_imports(f.__code__, sys.modules[f.__module__].__package__)
    parts = run.split(".")
    names |= {".".join(parts[:k]) for k in range(1, len(parts) + 1)}
    todo, seen = list(names), set()
    while todo:  # every imported repository module counts whole
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n != run:
            todo += _module_imports(n)
    return frozenset(str(Path(importlib.import_module(n).__file__).resolve().relative_to(ROOT)) for n in seen)


def missing_inputs(entry: str, sub: str | None, inputs) -> set[str]:
    return imported_files(entry, sub) - set(inputs)


# ---- the tests ----------------------------------------------------------------------------
def test_every_rule_lists_every_module_its_step_imports(rules):
    assert len(rules) > 100
    gaps = {r: sorted(missing_inputs(e, s, inputs)) for r, (e, s, inputs) in sorted(rules.items())}
    assert not {r: g for r, g in gaps.items() if g}


def test_rules_list_no_file_their_step_cannot_import(rules):
    """The computed lists are not padded either: exactly what the step can import (an edit
    elsewhere reruns nothing), and no step falls back to everything its __main__ imports."""
    from methods.core import codeinputs

    for r, (e, s, inputs) in sorted(rules.items()):
        assert set(inputs) == imported_files(e, s), r
        assert s is None or codeinputs.resolves(e, s, root=ROOT), r


def test_the_check_catches_a_missing_module(rules):
    """The ground truth sees what the old hand-written lists missed: SCOPE's GRPO step samples
    with the shared pool (methods/scope/run.py → methods/core/model_pool/pool.py), LFQ's final step
    re-runs GPTQ, Memora's aggregate reads the store simulator and the generator."""
    for rule, dropped in [("scope_grpo", "methods/core/model_pool/pool.py"), ("lfq_final", "methods/lfq/gptq.py"),
                          ("memora_aggregate", "methods/memora/memory.py"),
                          ("memora_aggregate", "methods/memora/synth.py")]:
        entry, sub, inputs = rules[rule]
        assert dropped in inputs
        assert missing_inputs(entry, sub, inputs - {dropped}) == {dropped}, rule


def test_the_helper_resolves_every_parser_pattern():
    """cli.config_step(sub, name, f), a functools.partial `step(name, f)`, a module helper
    wrapping config_step, `s = sub.add_parser(name)` + `s.set_defaults(func=f)` (also chained),
    and the fallback to every import of __main__ for what it cannot resolve."""
    import ast

    from methods.core.codeinputs import dispatch_table

    src = '''
import functools
from methods.core import cli

def _a(x): from . import a
def _b(x): pass
def _c(x): pass
def _d(x): pass
def _e(x): pass

def step(name, func, *files):
    return cli.config_step(SUB, name, func, "help", *files)

def build_parser():
    p, sub = cli.subcommands("x", "y")
    cli.config_step(sub, "a", _a, "help")
    s = functools.partial(cli.config_step, sub)
    s("b", _b, "help", "out")
    step("c", _c)
    s = sub.add_parser("d")
    s.set_defaults(func=_d)
    sub.add_parser("e", help="h").set_defaults(func=_e)
    s = sub.add_parser("f")
    s.set_defaults(func=lambda a: None)
    return p
'''
    table = dispatch_table(ast.parse(src))
    assert table == {"a": "_a", "b": "_b", "c": "_c", "d": "_d", "e": "_e", "f": None}


def test_editing_grpo_reruns_only_the_steps_that_import_it(rules):
    """Editing methods/rl_sgd/grpo.py reruns (besides what reads their outputs) exactly the
    rules whose step can import it. rl_sgd's run.py imports grpo inside the functions of several
    steps, and a module counts whole: every rl_sgd step that goes through run.py lists it, the
    figure/table step (analysis.py) does not, and SCOPE, whose GRPO stage is its own
    (methods/scope/run.py), does not."""
    listing = {r for r, (_e, _s, inputs) in rules.items() if "methods/rl_sgd/grpo.py" in inputs}
    assert listing == {r for r, (e, s, _i) in rules.items() if "methods/rl_sgd/grpo.py" in imported_files(e, s)}
    assert listing == {"rl_sgd_grpo", "rl_sgd_warmstart", "rl_sgd_sft", "rl_sgd_sparsity", "rl_sgd_trl_check",
                       "rl_sgd_prompts"}
    assert not {r for r in listing if r.startswith("scope_")}
    # and the probes edit of tests/workflow/test_smoke.py stays confined to wd_plasticity_probes
    probes = {r for r, (_e, _s, i) in rules.items() if "methods/wd_plasticity/probes.py" in i}
    assert probes == {"wd_plasticity_probes"}


def test_the_helper_on_a_small_tree(tmp_path):
    """Relative imports, `from pkg import module` vs `from module import name`, `import
    kernels.x`, package __init__ files on the path, imports inside functions of imported
    modules (all of them), only the dispatched function of __main__, and the fallback."""
    from methods.core.codeinputs import CodeIndex

    files = {
        "methods/__init__.py": "",
        "methods/core/__init__.py": "",
        "methods/core/cli.py": "from .results import InputError\n",
        "methods/core/results.py": "class InputError(Exception): pass\n",
        "methods/core/plots.py": "",
        "methods/p/__init__.py": "",
        "methods/p/sub/__init__.py": "",
        "methods/p/sub/deep.py": "from ..util import helper\n",
        "methods/p/util.py": "def helper():\n    import kernels.k\n",
        "methods/p/other.py": "from methods.core import plots\n",
        "methods/p/__main__.py": (
            "import functools\nfrom methods.core import cli\nfrom methods.core.cli import InputError\n"
            "def _cfg(a):\n    from .sub import deep\n"
            "def _a(a):\n    _cfg(a)\n"
            "def _b(a):\n    from . import other\n"
            "def build_parser():\n    p, sub = cli.subcommands('p', 'd')\n"
            "    step = functools.partial(cli.config_step, sub)\n"
            "    step('a', _a, 'h')\n    step('b', _b, 'h')\n    return p\n"),
        "kernels/__init__.py": "",
        "kernels/k.py": "",
    }
    for f, text in files.items():
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(text)
    ix = CodeIndex(tmp_path)
    base = {"methods/__init__.py", "methods/core/__init__.py", "methods/core/cli.py", "methods/core/results.py",
            "methods/p/__init__.py", "methods/p/__main__.py"}
    assert set(ix.step_files("p", "a")) == base | {
        "methods/p/sub/__init__.py", "methods/p/sub/deep.py", "methods/p/util.py",
        "kernels/__init__.py", "kernels/k.py"}
    assert set(ix.step_files("p", "b")) == base | {"methods/p/other.py", "methods/core/plots.py"}
    # an unknown sub-command: everything __main__ imports anywhere
    assert set(ix.step_files("p", "zzz")) == set(ix.step_files("p", "a")) | set(ix.step_files("p", "b"))


def test_core_sub_package_step():
    """A step run from a package inside core (`python -m methods.core.model_pool data`): its
    sub-commands resolve, and the package's parents and modules are its inputs."""
    from methods.core import codeinputs

    for sub in ("data", "train", "verifier", "costs"):
        assert codeinputs.resolves("core.model_pool", sub, ROOT), sub
        files = set(codeinputs.step_files("core.model_pool", sub, ROOT))
        assert {"methods/__init__.py", "methods/core/__init__.py", "methods/core/model_pool/__init__.py",
                "methods/core/model_pool/__main__.py", "methods/core/model_pool/pool.py",
                "methods/core/cli.py"} <= files, sub
        assert not any(f.startswith(("methods/uniscale/", "methods/scope/")) for f in files), sub


def test_editing_core_rl_reruns_only_the_grpo_steps(rules):
    """The shared RL module (methods/core/rl.py: group advantages, GRPO loss, completion
    log-probs, sampling) is a code input of rl_sgd's and SCOPE's GRPO steps, and of nothing
    outside those two papers: editing it reruns them and leaves every other paper cached."""
    listing = {r for r, (_e, _s, inputs) in rules.items() if "methods/core/rl.py" in inputs}
    assert listing == {r for r, (e, s, _i) in rules.items() if "methods/core/rl.py" in imported_files(e, s)}
    assert {"rl_sgd_grpo", "scope_grpo"} <= listing, sorted(listing)
    assert all(r.startswith(("rl_sgd_", "scope_")) for r in listing), sorted(listing)
