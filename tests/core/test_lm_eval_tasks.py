"""Every lm-eval task named in config/scales/paper.yaml resolves in lm-eval's registry, and the
Python its configs run imports with our pinned deps — so the first GPU run does not die on a
missing optional dependency (ifeval → langdetect, ruler → wonderwords, longbench → jieba,
minerva_math → math_verify + antlr4 4.11, ...).

Offline: each task is built through lm-eval's own TaskFactory (the path `simple_evaluate`
takes, which imports every `!function` module and checks each named function exists) with
`ConfigurableTask` swapped for a recorder, because a real task downloads its dataset in its
constructor. The recorder also lets us check that our own group/tag expansion
(`evaluate.lm_eval_leaf_tasks`, used by `evaluate.metric`) names the same leaf tasks, in the
same order, as lm-eval's factory.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import os
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
import yaml

from methods.core.evaluate import LM_EVAL_TASK_KEYS, lm_eval_leaf_tasks, lm_eval_task_names
from methods.core.results import REPO_ROOT, InputError

PAPER = REPO_ROOT / "config" / "scales" / "paper.yaml"
# `*task*` keys of paper.yaml that do not hold lm-eval names (our own data): with
# LM_EVAL_TASK_KEYS they must cover every such key, so a new key cannot slip past this test
NOT_LM_EVAL_TASK_KEYS = ("world.tasks",      # wd_plasticity: SFT datasets by name
                         "data.tasks",       # efficient_dlm: generated task kinds (add, rev)
                         "n_per_task")       # a count
# Task utils that fetch HF evaluate's `code_eval` metric script from the hub at import time:
# offline that fetch is the only step that can fail, so it is intercepted and checked to be
# what stopped the import (HF_ALLOW_CODE_EVAL and run_lm_eval's confirm_run_unsafe_code are
# paper-run concerns, not imports).
HUB_AT_IMPORT = {"humaneval/utils.py", "mbpp/utils.py"}


@pytest.fixture(scope="module")
def paper_tasks() -> dict[str, list[str]]:
    return lm_eval_task_names(yaml.safe_load(PAPER.read_text()))


@pytest.fixture(scope="module")
def task_manager():
    from lm_eval.tasks import TaskManager

    return TaskManager()


class _HubFetch(Exception):
    """`evaluate.load` was called: it would download a metric script from the hub."""


@pytest.fixture(scope="module")
def built(task_manager, paper_tasks):
    """{name: (leaf task names in lm-eval's order, their resolved configs) or the exception}.
    Built once per module: importing the utils (RULER's word lists) costs seconds."""
    import evaluate as hf_evaluate
    import lm_eval.tasks._factory as factory
    from lm_eval.api.task import ConfigurableTask

    class Recorded(ConfigurableTask):
        # keeps the config TaskFactory resolved (functions imported, includes merged) and
        # skips ConfigurableTask.__init__, whose first act is downloading the dataset
        def __init__(self, config=None, **_):
            self.cfg = dict(config)

        @property
        def task_name(self):
            return self.cfg["task"]

    def no_hub(path, *a, **k):
        raise _HubFetch(path)

    mp = pytest.MonkeyPatch()
    mp.setattr(factory, "ConfigurableTask", Recorded)
    mp.setattr(hf_evaluate, "load", no_hub)
    # ifeval and ruler fetch nltk's punkt_tab at import, on LOCAL_RANK 0 only: that is data for
    # the run, not a dependency; keep the test off the network
    mp.setenv("LOCAL_RANK", "1")
    out = {}
    try:
        for name in sorted(paper_tasks):
            try:
                tasks = task_manager.load(name)["tasks"]
                out[name] = (list(tasks), {t: tasks[t].cfg for t in tasks})
            except Exception as e:  # noqa: BLE001  (recorded per task, reported by the test)
                out[name] = e
    finally:
        mp.undo()
    return out


def test_task_keys_cover_the_paper_config():
    """Every key path of paper.yaml whose last key mentions `task` is either an lm-eval key
    (LM_EVAL_TASK_KEYS) or one of ours: a new lm-eval key cannot go unchecked."""
    def paths(node, path=()):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from paths(v, path + (str(k),))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from paths(v, path + (str(i),))
        yield ".".join(path)

    keys = LM_EVAL_TASK_KEYS + NOT_LM_EVAL_TASK_KEYS
    taskish = {p for p in paths(yaml.safe_load(PAPER.read_text())) if "task" in p.split(".")[-1]}
    assert taskish, "paper.yaml names no tasks at all"
    unclassified = sorted(p for p in taskish if not any(p == k or p.endswith("." + k) for k in keys))
    assert not unclassified, unclassified


def test_paper_task_names_are_collected(paper_tasks):
    # a few that the paper-scale configs name, from different keys (eval.tasks, arith_task, lm_eval.tasks,
    # lm_eval_tasks, eval_tasks)
    assert {"arithmetic", "wikitext", "longbench", "ruler", "ifeval", "minerva_math", "mmlu",
            "lambada_openai"} <= set(paper_tasks)
    assert "siamesenorm.eval.arith_task" in paper_tasks["arithmetic"]
    assert "add" not in paper_tasks and "metamathqa" not in paper_tasks    # our own data


def test_lm_eval_task_names_rejects_non_strings():
    with pytest.raises(InputError, match="lm_eval_tasks"):
        lm_eval_task_names({"p": {"hub": {"lm_eval_tasks": ["gsm8k", 3]}}})


def test_every_paper_task_resolves(task_manager, paper_tasks):
    """Each name is a registered task, group or tag of the pinned lm-eval."""
    index = task_manager.task_index
    missing = {n: where for n, where in paper_tasks.items() if n not in index}
    assert not missing, f"not in lm-eval {importlib.metadata.version('lm_eval')}: {missing}"
    kinds = {n: index[n].kind.name for n in paper_tasks}
    # the ones metric() must aggregate itself: arithmetic is a tag, not a group (no result row)
    assert kinds["arithmetic"] == "TAG" and kinds["mmlu"] == "GROUP"


def test_every_paper_task_builds_and_its_functions_import(built, paper_tasks):
    """lm-eval's factory resolves every `!function` (imports the module, finds the function)
    for every leaf task; only the hub fetch of `code_eval` may stop humaneval/mbpp."""
    failed = {n: f"{type(b).__name__}: {b}" for n, b in built.items()
              if isinstance(b, Exception) and not isinstance(b, _HubFetch)}
    assert not failed, failed
    hub = {n for n, b in built.items() if isinstance(b, _HubFetch)}
    assert hub == {"humaneval", "mbpp"}, hub
    assert all(str(built[n]) == "code_eval" for n in hub)
    for name in hub:
        # the module's imports all precede the fetch, so they did import (and the static test
        # below checks them again); check its source is what we say it is
        src = (_tasks_dir() / f"{name}/utils.py").read_text()
        assert "hf_evaluate.load(\"code_eval\")" in src
    leaf_cfgs = {t: cfg for n, b in built.items() if n not in hub for t, cfg in b[1].items()}
    assert len(leaf_cfgs) > 100                       # mmlu 57, longbench 21, ruler 13, ...
    fns = [v for cfg in leaf_cfgs.values() for v in _values(cfg) if callable(v)]
    assert any(f.__module__.endswith("ruler.niah_utils") for f in fns)


def test_leaf_expansion_matches_lm_eval(built, task_manager):
    """evaluate.lm_eval_leaf_tasks (what metric() averages over) = lm-eval's own expansion."""
    for name, b in built.items():
        if isinstance(b, _HubFetch):             # humaneval, mbpp: single tasks
            assert lm_eval_leaf_tasks(name, task_manager) == [name]
        elif not isinstance(b, Exception):       # a failed build is the test above's to report
            assert lm_eval_leaf_tasks(name, task_manager) == b[0], name


def test_named_metrics_are_lm_eval_builtins(built):
    """A metric named by string (no process_results) must be in lm-eval's registry: otherwise
    lm-eval falls back to `evaluate.load(name)`, a hub download at run time."""
    import lm_eval.api.metrics  # noqa: F401  (fills the registry)
    from lm_eval.api.registry import metric_registry

    unknown = set()
    for b in built.values():
        if isinstance(b, Exception):
            continue
        for task, cfg in b[1].items():
            if cfg.get("process_results") is not None:
                continue
            for m in cfg.get("metric_list") or []:
                if isinstance(m["metric"], str) and m["metric"] not in metric_registry:
                    unknown.add((task, m["metric"]))
    assert not unknown, unknown


def test_task_modules_import_everything_they_name(built):
    """Statically: every module any task util imports — also inside functions and
    try-blocks, which building a task does not execute — imports now."""
    files = {Path(inspect.getfile(v)) for b in built.values() if not isinstance(b, Exception)
             for cfg in b[1].values() for v in _values(cfg)
             if callable(v) and getattr(v, "__module__", "").startswith("lm_eval.tasks")}
    files |= {_tasks_dir() / f for f in HUB_AT_IMPORT}
    assert {f.relative_to(_tasks_dir()).as_posix() for f in files} >= {
        "ifeval/utils.py", "longbench/metrics.py", "minerva_math/utils.py", "ruler/niah_utils.py",
        "ruler/cwe_utils.py", "arithmetic/utils.py"}
    failed = {}
    for f in sorted(files):
        for mod in _imports(f):
            try:
                importlib.import_module(mod)
            except Exception as e:  # noqa: BLE001  (report every failure, not the first)
                failed[f"{f.relative_to(_tasks_dir())}: {mod}"] = f"{type(e).__name__}: {e}"
    assert not failed, failed


def test_math_and_longbench_deps_work(built):
    """The deps do their job, not just import: sympy's LaTeX parser runs on the pinned antlr4
    (4.11, which minerva_math asserts), math_verify verifies, and longbench's metrics score
    (jieba, rouge, fuzzywuzzy) with their closed-form values on identical/disjoint strings."""
    from lm_eval.tasks.longbench import metrics as lb
    from lm_eval.tasks.minerva_math import utils as mm

    assert mm.is_equiv(r"\frac{1}{2}", "0.5")            # parse_latex + sympy.simplify
    assert not mm.is_equiv(r"\frac{1}{3}", "0.5")
    doc = {"solution": r"so $x = \boxed{\frac{1}{2}}$", "answer": r"\frac{1}{2}"}
    assert mm.process_results(doc, ["Final Answer: The final answer is $0.5$. I hope it is correct."]) \
        == {"exact_match": 1, "math_verify": 1}
    # rouge's F-measure is 2PR / (P + R + 1e-8): P = R = 1 gives 2 / (2 + 1e-8)
    f_identical = 2 / (2 + 1e-8)
    assert lb.rouge_score("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(f_identical, abs=1e-12)
    assert lb.rouge_score("alpha beta", "gamma delta") == pytest.approx(0.0, abs=1e-12)
    assert lb.rouge_zh_score("我爱北京天安门", "我爱北京天安门") == pytest.approx(f_identical, abs=1e-12)
    # code_sim_score: fuzz.ratio of the prediction's first code line (the comment is skipped):
    # 2·matches / total chars = 20/22, rounded to a whole percent
    assert lb.code_sim_score("# comment\nreturn abcd", "return abce") == pytest.approx(0.91, abs=1e-12)
    assert lb.qa_f1_zh_score("北京", "北京") == pytest.approx(1.0, abs=1e-12)


# ------------------------------------------------------------------------------ helpers ----
def _tasks_dir() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent


def _values(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _values(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _values(v)
    else:
        yield obj


def _imports(path: Path) -> list[str]:
    """Absolute module names a file imports anywhere (relative ones resolved in lm_eval.tasks)."""
    pkg = "lm_eval.tasks." + ".".join(path.relative_to(_tasks_dir()).parent.parts)
    mods = set()
    with warnings.catch_warnings():     # some task files have invalid escapes in strings
        warnings.simplefilter("ignore")
        tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.rsplit(".", node.level - 1)[0] if node.level > 1 else pkg
                mods.add(f"{base}.{node.module}" if node.module else base)
            else:
                mods.add(node.module)
    return sorted(mods)
