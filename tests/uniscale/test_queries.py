"""The benchmark query stream (methods/uniscale/queries.py): records read through `datasets` from
hub-layout stand-ins of MATH-500 / AIME 2024 / AMC 2023 in their real schemas, answer extraction
and comparison on hand-checked cases, and the table's math task (prompt in the member's chat
template, the PRM given the raw problem, \\boxed answers voted and scored)."""
import random

import pytest

from methods.core.results import InputError
from methods.uniscale import queries as Q
from methods.uniscale.config import QueriesConfig, QuerySet
from tests.paper_path import standins


@pytest.mark.parametrize("text,want", [
    ("so the answer is \\boxed{7}.", "7"),
    ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("nested \\boxed{\\sqrt{x^{2}}} end", "\\sqrt{x^{2}}"),
    ("\\fbox{3}", "3"),
    ("no box here", None),
    ("unbalanced \\boxed{3", None),
])
def test_last_boxed(text, want):
    assert Q.last_boxed(text) == want


@pytest.mark.parametrize("pred,gold,ok", [
    ("7", "7", True), ("7.0", "7", True), ("\\dfrac{1}{2}", "\\frac12", False), ("\\dfrac{1}{2}", "\\frac{1}{2}", True),
    ("\\text{(B)}", "(B)", True), ("1,000", "1000", True), ("90^\\circ", "90", True), ("$5$.", "5", True),
    ("\\left(1, 2\\right)", "(1,2)", True), ("8", "7", False), (None, "7", False),
])
def test_equal(pred, gold, ok):
    assert Q.equal(pred, gold) is ok


def test_answer_text_of_float_gold():
    assert Q.answer_text(27.0) == "27" and Q.answer_text(2.5) == "2.5" and Q.answer_text("033") == "033"


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("qsets")
    for kind in ("math500", "aime_h4", "amc23"):
        standins.write_dataset(kind, root / kind)
    return root


def test_load_queries_from_hub_layout(sets):
    import datasets

    cfg = QueriesConfig(sets=[QuerySet("math500", str(sets / "math500"), "test", 5),
                              QuerySet("aime24", str(sets / "aime_h4"), "train", 3),
                              QuerySet("amc23", str(sets / "amc23"), "test", None)])
    qs = Q.load_queries(cfg)
    m = datasets.load_dataset(str(sets / "math500"), split="test").to_list()
    a = datasets.load_dataset(str(sets / "aime_h4"), split="train").to_list()
    c = datasets.load_dataset(str(sets / "amc23"), split="test").to_list()
    assert len(qs) == 5 + 3 + len(c) and [q["qid"] for q in qs] == list(range(len(qs)))
    assert [q["problem"] for q in qs[:5]] == [r["problem"] for r in m[:5]]
    assert [q["difficulty"] for q in qs[:5]] == [r["level"] for r in m[:5]]
    assert [q["answer"] for q in qs[5:8]] == [str(r["answer"]) for r in a[:3]]
    assert [q["problem"] for q in qs[8:]] == [r["question"] for r in c]        # amc23: a `question` column
    assert [q["answer"] for q in qs[8:]] == [str(int(r["answer"])) for r in c]  # stored as floats
    assert {q["family"] for q in qs} == {"math500", "aime24", "amc23"} and {q["kind"] for q in qs} == {"math"}
    assert all(q["prompt"] == f"{q['problem']}\n{Q.INSTRUCTION}" for q in qs)


def test_too_few_rows_is_one_line_error(sets):
    with pytest.raises(InputError, match="fewer than n=999") as e:
        Q.load_queries(QueriesConfig(sets=[QuerySet("aime24", str(sets / "aime_h4"), "train", 999)]))
    assert "\n" not in str(e.value)


def test_math_task_in_the_table(tmp_path):
    """run_member on benchmark queries with a tiny Qwen3 stand-in: the member sees its chat
    template; the verifier is given the raw problem and the completion; correct = boxed answer."""
    torch = pytest.importorskip("torch")
    from methods.core.models import load_model
    from methods.uniscale.config import TableConfig
    from methods.uniscale.table import Math, run_member, task_of

    rng = random.Random(0)
    d = tmp_path / "qwen3"
    standins.write_model("qwen3", d, [standins.corpus_text(rng, 8) for _ in range(40)])
    model, tok = load_model(d, dtype=torch.float32)
    qs = [{"qid": i, "family": "math500", "difficulty": 1, "digits": 0, "kind": "math", "problem": p,
           "prompt": Q.user_message(p), "answer": a} for i, (p, a) in enumerate([("What is 2+2?", "4"),
                                                                                 ("What is 3+3?", "6")])]
    assert isinstance(task_of(qs), Math)
    seen = []

    def score(problems, outs):
        seen.extend(problems)
        return [0.5] * len(outs)

    cfg = TableConfig(n_queries=2, bon=[2], beam_cp=2, beam_bs=1, max_rounds=2, temperature=1.0, max_new_tokens=6,
                      chunk=8, intensity=156.0, bytes_w=2, bytes_kv=2, seed=0)
    arch = {"P": 1, "L": 1, "d_model": 8, "n_q": 1, "n_kv": 1, "head_dim": 8, "d_ff": 8, "vocab": 8,
            "flops_per_token": 1.0}
    rows = run_member("m", model, tok, arch, arch, score, qs, cfg, 0)
    assert set(seen) == {q["problem"] for q in qs}               # raw problems, not templated prompts
    assert {r["tts"] for r in rows} == {"greedy", "bon2", "beam"} and len(rows) == 6
    for r in rows:
        q = qs[r["qid"]]
        assert r["correct"] == int(Q.is_correct(q, r["output"]))
    assert Q.prompt_for(tok, "P").startswith("<|im_start|>user\nP\n" + Q.INSTRUCTION)
