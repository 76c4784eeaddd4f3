"""The source files a DAG step can import, computed from the code.

Snakemake does not look at the modules a command imports, so every rule lists the source
files of its step as inputs: editing one reruns that step and what depends on it. Hand-kept
lists drift (a step starts sampling with `methods/core/model_pool/pool.py`, its rule never learns),
so `step_files` computes them with `ast` alone (nothing is imported or executed; no torch):

- the step `python -m methods.<entry> <sub>` runs `methods/<entry>/__main__.py` (or
  `methods/<entry>.py` for a plain module such as `core.report`); the packages on its path
  (`methods/__init__.py`, `methods/<entry>/__init__.py`) run first;
- of `__main__`, the module-level imports, plus the imports inside the function the
  sub-command dispatches to and inside the module's own functions that function names
  (`_cfg`, `_agent`, ...). The function is found in the parser construction:
  `cli.config_step(sub, "<sub>", func, ...)`, a `step = functools.partial(cli.config_step,
  sub)` helper called as `step("<sub>", func, ...)`, a module function that wraps
  `config_step`/`add_parser` called the same way, or `s = sub.add_parser("<sub>", ...)` then
  `s.set_defaults(func=func)` (also chained). A sub-command that cannot be resolved falls
  back to every import of `__main__`, module-level or not: safe, only broader;
- then, transitively, for every imported module under `methods/` or `kernels/`, ALL its
  imports (module-level and inside functions: within one module an over-approximation,
  which can only rerun too much, never too little), with relative imports resolved and
  `from pkg import name` counted as the module `pkg.name` where that file exists. Every
  package `__init__.py` on an imported module's path counts as imported.

Each file is parsed once per process (one Snakemake invocation), and `cached_step` keeps the
answers in `.snakemake/code-inputs.json` under the repository root, valid while no source file
under ROOTS is added, removed or changed (size or modification time): a rerun parses nothing.
"""
from __future__ import annotations

import ast
import atexit
import copy
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOTS = ("methods", "kernels")  # top-level packages whose files are code inputs


@dataclass(frozen=True)
class _Module:
    name: str          # dotted: methods.lfq.ptq, methods.lfq (a package: its __init__.py)
    path: Path         # relative to the repository root
    is_package: bool
    tree: ast.Module


class CodeIndex:
    """Parsed modules of one repository checkout, cached by module name."""

    def __init__(self, root: str | Path = "."):
        self.root = Path(root)
        self._modules: dict[str, _Module | None] = {}
        self._imports: dict[str, frozenset[str]] = {}   # every import anywhere in the module
        self._closure: dict[str, frozenset[str]] = {}
        self._tables: dict[str, dict[str, str | None]] = {}
        self._steps: dict[tuple[str, str | None], frozenset[str]] = {}

    # ---- modules and files -------------------------------------------------------------
    def module(self, name: str) -> _Module | None:
        """The repository module `name` (None where it is not a file under ROOTS)."""
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> _Module | None:
        parts = name.split(".")
        if parts[0] not in ROOTS:
            return None
        base = Path(*parts)
        for path, is_pkg in ((base / "__init__.py", True), (base.with_suffix(".py"), False)):
            if (self.root / path).is_file():
                src = (self.root / path).read_text(encoding="utf-8")
                return _Module(name, path, is_pkg, ast.parse(src, filename=str(path)))
        return None

    def _with_parents(self, name: str) -> set[str]:
        """`name` and every package above it (their __init__.py run first)."""
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}

    # ---- imports of one module ---------------------------------------------------------
    def _package_of(self, mod: _Module) -> str:
        return mod.name if mod.is_package else mod.name.rpartition(".")[0]

    def _resolve(self, mod: _Module, node: ast.Import | ast.ImportFrom) -> set[str]:
        """The repository modules one import statement imports (parents included)."""
        out: set[str] = set()
        if isinstance(node, ast.Import):
            for alias in node.names:
                out |= self._with_parents(alias.name)
        else:
            if node.level:
                pkg = self._package_of(mod).split(".")
                if node.level - 1 > len(pkg) - 1:
                    raise ImportError(f"{mod.path}:{node.lineno}: relative import beyond the top package")
                base_parts = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out |= self._with_parents(base)
            for alias in node.names:
                # `from methods.core import cli` imports the module methods.core.cli;
                # `from methods.core.cli import main` a name (no such module file)
                if alias.name != "*" and self.module(f"{base}.{alias.name}") is not None:
                    out.add(f"{base}.{alias.name}")
        return {n for n in out if self.module(n) is not None}

    def _imports_in(self, mod: _Module, nodes) -> set[str]:
        out: set[str] = set()
        for top in nodes:
            for node in ast.walk(top):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out |= self._resolve(mod, node)
        return out

    def imports(self, name: str) -> frozenset[str]:
        """Every repository module imported anywhere in module `name` (also in functions)."""
        if name not in self._imports:
            mod = self.module(name)
            self._imports[name] = frozenset(self._imports_in(mod, [mod.tree]) if mod else ())
        return self._imports[name]

    def closure(self, name: str) -> frozenset[str]:
        """`name`, its packages, and transitively everything they import (anywhere)."""
        if name in self._closure:
            return self._closure[name]
        seen: set[str] = set()
        todo = [n for n in self._with_parents(name) if self.module(n) is not None]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(self.imports(n) - seen)
        self._closure[name] = frozenset(seen)
        return self._closure[name]

    def table(self, mod: _Module) -> dict[str, str | None]:
        """`dispatch_table` of a module, computed once."""
        if mod.name not in self._tables:
            self._tables[mod.name] = dispatch_table(mod.tree)
        return self._tables[mod.name]

    # ---- the step's entry point --------------------------------------------------------
    def main_module(self, entry: str) -> _Module:
        """The module `python -m methods.<entry>` runs."""
        name = entry if entry.split(".")[0] in ROOTS else f"methods.{entry}"
        mod = self.module(name)
        if mod is not None and mod.is_package:
            mod = self.module(f"{name}.__main__")
        if mod is None:
            raise FileNotFoundError(f"no module to run for `python -m {name}` under {self.root}")
        return mod

    def step_modules(self, entry: str, sub: str | None = None) -> frozenset[str]:
        """The repository modules `python -m methods.<entry> <sub>` can import (computed once)."""
        if (entry, sub) not in self._steps:
            self._steps[(entry, sub)] = self._step_modules(entry, sub)
        return self._steps[(entry, sub)]

    def _step_modules(self, entry: str, sub: str | None) -> frozenset[str]:
        mod = self.main_module(entry)
        if sub is None:
            # a plain module run as a script (core.report): its main() and all it calls run
            seeds = set(self.imports(mod.name))
        else:
            funcs = _module_functions(mod.tree)
            table = self.table(mod)
            target = table.get(sub)
            if target is None or not (target in funcs or target in _module_bound_names(mod.tree)):
                # The sub-command's function could not be found (a parser pattern this resolver
                # does not know, a lambda or an attribute as func, a name registered twice):
                # fall back to every import of __main__, in any function. Safe, only broader.
                seeds = set(self.imports(mod.name))
            else:
                # what runs on every invocation: module-level statements (class bodies
                # included, their methods not), the module functions and classes they name
                # (build_parser, ...) without the other sub-commands' functions; then the
                # sub-command's function and the module functions and classes (whole) it
                # names (_cfg, _agent, ...). An imported function as func is covered by the
                # module-level imports.
                top = [s for s in mod.tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
                stripped = [_strip_functions(s) for s in top]
                skip = {f for f in table.values() if f} - {target}
                called = {n.id for t in stripped for n in ast.walk(t) if isinstance(n, ast.Name) and n.id in funcs}
                run = _reachable(funcs, called | {target}, skip)
                seeds = self._imports_in(mod, stripped + [funcs[f] for f in sorted(run)])
        out: set[str] = set(self._with_parents(mod.name))
        for n in seeds:
            out |= self.closure(n)
        return frozenset(n for n in out if self.module(n) is not None)

    def step_files(self, entry: str, sub: str | None = None) -> list[str]:
        """Sorted relative paths of every source file `python -m methods.<entry> <sub>` can
        import (entry: "lfq", "core", "core.report", ...)."""
        return sorted(str(self.module(n).path) for n in self.step_modules(entry, sub))


# ---- finding the sub-command's function in the parser construction ---------------------
def _module_functions(tree: ast.Module) -> dict[str, ast.stmt]:
    """The module's functions and classes by name (a class counts whole, its methods too)."""
    return {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _module_bound_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by imports (their modules are seeded anyway)."""
    out = set()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in s.names}
    return out


def _strip_functions(node: ast.AST) -> ast.AST:
    """A copy of a module-level statement without the bodies of functions defined in it."""

    class Strip(ast.NodeTransformer):
        def visit_FunctionDef(self, n):
            return None

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Lambda(self, n):
            return ast.Constant(None)

    return Strip().visit(copy.deepcopy(node)) or ast.Pass()


def _reachable(funcs: dict[str, ast.stmt], start: set[str], skip: set[str] = frozenset()) -> set[str]:
    """The module functions (and classes) in `start` and those they name, transitively
    (helpers like `_cfg`), not entering `skip`."""
    seen, todo = set(), list(start)
    while todo:
        f = todo.pop()
        if f in seen or f not in funcs or f in skip:
            continue
        seen.add(f)
        todo.extend(n.id for n in ast.walk(funcs[f]) if isinstance(n, ast.Name) and n.id in funcs)
    return seen


def _callee(node: ast.expr) -> str | None:
    """`config_step` of `cli.config_step`/`config_step`; the name of a plain call."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _func_name(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _arg(call: ast.Call, pos: int, kw: str):
    if len(call.args) > pos:
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg == kw), None)


def dispatch_table(tree: ast.Module) -> dict[str, str | None]:
    """{sub-command: the name of the function it dispatches to} from the parser construction
    (see the module docstring for the patterns); None where the func is not a plain name or a
    sub-command is registered twice with different functions."""
    funcs = _module_functions(tree)
    # step-like helpers, called as helper("<name>", func, ...): partials of config_step, and
    # module functions other than build_parser whose body registers a sub-parser
    registers = ("config_step", "add_parser")
    helpers = {n for n, f in funcs.items()
               if n != "build_parser" and not isinstance(f, ast.ClassDef)
               and any(isinstance(c, ast.Call) and _callee(c.func) in registers for c in ast.walk(f))}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _callee(node.value.func) == "partial"
                and node.value.args and _callee(node.value.args[0]) == "config_step"):
            helpers.add(node.targets[0].id)

    found: list[tuple[str, str | None]] = []

    class Visit(ast.NodeVisitor):
        """In source order: `s = sub.add_parser(name)` binds s to name until rebound."""

        def __init__(self):
            self.parsers: dict[str, str | None] = {}

        def _registered(self, call) -> str | None:
            name = _callee(call.func)
            if name == "add_parser" or (isinstance(call.func, ast.Name) and name in helpers):
                return _str(_arg(call, 0, "name"))
            if name == "config_step":
                return _str(_arg(call, 1, "name"))
            return None

        def visit_Assign(self, node):
            self.generic_visit(node)
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.parsers[t.id] = self._registered(node.value) if isinstance(node.value, ast.Call) else None

        def visit_Call(self, node):
            self.generic_visit(node)
            name = _callee(node.func)
            if name == "config_step" and _str(_arg(node, 1, "name")):
                found.append((_str(_arg(node, 1, "name")), _func_name(_arg(node, 2, "func"))))
            elif isinstance(node.func, ast.Name) and name in helpers and _str(_arg(node, 0, "name")):
                found.append((_str(_arg(node, 0, "name")), _func_name(_arg(node, 1, "func"))))
            elif name == "set_defaults" and isinstance(node.func, ast.Attribute):
                recv = node.func.value
                if isinstance(recv, ast.Name):
                    parser = self.parsers.get(recv.id)
                elif isinstance(recv, ast.Call):
                    parser = self._registered(recv)
                else:
                    parser = None
                func = next((k.value for k in node.keywords if k.arg == "func"), None)
                if parser and func is not None:
                    found.append((parser, _func_name(func)))

    Visit().visit(tree)
    table: dict[str, str | None] = {}
    for sub, func in found:
        table[sub] = func if table.get(sub, func) == func else None
    return table


def dispatch_function(tree: ast.Module, sub: str) -> str | None:
    """The name of the module function sub-command `sub` dispatches to, or None."""
    return dispatch_table(tree).get(sub)


_INDEXES: dict[str, CodeIndex] = {}


def index(root: str | Path = ".") -> CodeIndex:
    """The CodeIndex of a checkout, one per process and root (each file parsed once)."""
    key = str(Path(root).resolve())
    if key not in _INDEXES:
        _INDEXES[key] = CodeIndex(root)
    return _INDEXES[key]


def step_files(entry: str, sub: str | None = None, root: str | Path = ".") -> list[str]:
    """Sorted relative paths of the source files `python -m methods.<entry> <sub>` can import."""
    return index(root).step_files(entry, sub)


def resolves(entry: str, sub: str, root: str | Path = ".") -> bool:
    """Whether sub-command `sub` of `python -m methods.<entry>` is found in its parser
    construction (else `step_files` falls back to every import of its __main__)."""
    ix = index(root)
    mod = ix.main_module(entry)
    target = ix.table(mod).get(sub)
    return target is not None and (target in _module_functions(mod.tree) or target in _module_bound_names(mod.tree))


# ---- answers kept across Snakemake invocations ---------------------------------------------
CACHE_FILE = Path(".snakemake") / "code-inputs.json"
_CACHES: dict[str, dict] = {}


def _tree_stamp(root: Path) -> str:
    """A digest of every source file under ROOTS: its path, size and modification time."""
    h = hashlib.sha256()
    for top in ROOTS:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(".py"):
                    st = os.stat(os.path.join(dirpath, f))
                    h.update(f"{os.path.relpath(os.path.join(dirpath, f), root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _cache(root: Path) -> dict:
    key = str(root.resolve())
    if key not in _CACHES:
        stamp, steps = _tree_stamp(root), {}
        try:
            doc = json.loads((root / CACHE_FILE).read_text(encoding="utf-8"))
            if isinstance(doc, dict) and doc.get("stamp") == stamp and isinstance(doc.get("steps"), dict):
                steps = doc["steps"]
        except (OSError, ValueError):
            pass  # no cache yet, or an unreadable one: recompute
        _CACHES[key] = {"root": root, "stamp": stamp, "steps": steps, "dirty": False}
        atexit.register(_save, _CACHES[key])
    return _CACHES[key]


def _save(cache: dict) -> None:
    """Write the cache atomically; a read-only checkout just goes without one."""
    if not cache["dirty"]:
        return
    path = cache["root"] / CACHE_FILE
    try:
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".code-inputs.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"stamp": cache["stamp"], "steps": cache["steps"]}, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        pass


def cached_step(entry: str, sub: str | None = None, root: str | Path = ".") -> tuple[list[str], bool]:
    """(`step_files`, `resolves`) of a step — True for a module run as a script — from the cache
    of the current source tree when it has them, else computed and added to it."""
    cache = _cache(Path(root))
    key = f"{entry} {sub or ''}"
    hit = cache["steps"].get(key)
    if not (isinstance(hit, dict) and isinstance(hit.get("files"), list) and isinstance(hit.get("resolves"), bool)):
        hit = {"files": step_files(entry, sub, root), "resolves": sub is None or resolves(entry, sub, root)}
        cache["steps"][key], cache["dirty"] = hit, True
    return list(hit["files"]), hit["resolves"]
