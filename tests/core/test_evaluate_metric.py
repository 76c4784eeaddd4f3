"""evaluate.metric on groups and tags: a group's own aggregate row is used as lm-eval wrote it;
a tag (no row: lm-eval's `arithmetic`) or a group without the aggregate is the
sample-size-weighted mean over its leaf tasks — lm-eval's group rule
(api/metrics.aggregate_subtask_metrics, weight_by_size=True over Group.get_all_tasks()).
Checked against hand computations, against lm-eval's aggregate function, and against the
aggregate row lm-eval itself writes for a group of the same tasks in a real run."""
from __future__ import annotations

import json
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import yaml

from methods.core.evaluate import export_task, lm_eval_leaf_tasks, metric, run_lm_eval
from methods.core.results import InputError


def row(**metrics) -> dict:
    return {"alias": "x", **{f"{k},none": v for k, v in metrics.items()},
            **{f"{k}_stderr,none": "N/A" for k in metrics}}


def results_for(values: dict[str, float], sizes: dict[str, int], metric_name: str = "acc") -> dict:
    """A run_lm_eval-shaped dict: rows with `metric,none` and n_samples with `effective`."""
    return {"results": {t: row(**{metric_name: v}) for t, v in values.items()},
            "n_samples": {t: {"original": 2 * n, "effective": n} for t, n in sizes.items()}}


@pytest.fixture(scope="module")
def registered():
    from lm_eval.tasks import TaskManager

    return TaskManager()


@pytest.fixture(scope="module")
def local_tm(tmp_path_factory):
    """t0..t3 (t0, t1, t2 tagged `mytag`); group `inner` = [t0, t1] with an acc aggregate;
    group `outer` = [inner, t2, {task: t3}] with none. The YAMLs are only indexed, never run."""
    from lm_eval.tasks import TaskManager

    d = tmp_path_factory.mktemp("tasks")
    for i in range(4):
        cfg = {"task": f"t{i}", "dataset_path": "json", "output_type": "loglikelihood"}
        if i < 3:
            cfg["tag"] = "mytag"
        (d / f"t{i}.yaml").write_text(yaml.safe_dump(cfg))
    (d / "inner.yaml").write_text(yaml.safe_dump(
        {"group": "inner", "task": ["t0", "t1"], "aggregate_metric_list": [{"metric": "acc"}]}))
    (d / "outer.yaml").write_text(yaml.safe_dump({"group": "outer", "task": ["inner", "t2", {"task": "t3"}]}))
    return TaskManager(include_path=str(d), include_defaults=False)


def test_arithmetic_tag_is_the_size_weighted_mean(registered, monkeypatch):
    """`arithmetic` is a tag of 10 tasks in lm-eval 0.4.13. acc_i = i/10, n_i = 100 (i+1):
    sum n_i acc_i / sum n_i = 10·sum_i (i+1) i / 5500 = 10·330/5500 = 0.6 (unweighted: 0.45)."""
    from lm_eval.api.metrics import aggregate_subtask_metrics

    members = lm_eval_leaf_tasks("arithmetic", registered)
    assert members == ["arithmetic_1dc", "arithmetic_2da", "arithmetic_2dm", "arithmetic_2ds",
                       "arithmetic_3da", "arithmetic_3ds", "arithmetic_4da", "arithmetic_4ds",
                       "arithmetic_5da", "arithmetic_5ds"]
    values = {t: i / 10 for i, t in enumerate(members)}
    sizes = {t: 100 * (i + 1) for i, t in enumerate(members)}
    res = results_for(values, sizes)
    got = metric(res, "arithmetic", "acc", task_manager=registered)
    assert got == pytest.approx(0.6, abs=1e-12)
    assert got == pytest.approx(aggregate_subtask_metrics(list(values.values()), list(sizes.values())),
                                abs=1e-12)
    # the default task manager is run_lm_eval's registered view
    monkeypatch.delenv("ICML26_LM_EVAL_TASKS", raising=False)
    assert metric(res, "arithmetic", "acc") == pytest.approx(0.6, abs=1e-12)
    # lm-eval's raw dict spells it "n-samples"
    raw = {"results": res["results"], "n-samples": res["n_samples"]}
    assert metric(raw, "arithmetic", "acc", task_manager=registered) == pytest.approx(0.6, abs=1e-12)


def test_group_without_aggregate_flattens_nested_groups(local_tm):
    """`outer` has no aggregate row: its leaves are t0, t1 (via `inner`), t2, t3 — lm-eval
    weighs leaves, not subgroup aggregates. (0.5·4 + 0.25·8 + 1.0·2 + 0.0·6) / 20 = 0.3;
    the `inner` row (0.9, deliberately not its leaves' mean) must not enter."""
    assert lm_eval_leaf_tasks("outer", local_tm) == ["t0", "t1", "t2", "t3"]
    res = results_for({"t0": 0.5, "t1": 0.25, "t2": 1.0, "t3": 0.0}, {"t0": 4, "t1": 8, "t2": 2, "t3": 6})
    res["results"]["inner"] = {"alias": "inner", "acc,none": 0.9}
    res["results"]["outer"] = {"alias": "outer", "name": "outer"}   # lm-eval's row without aggregate
    assert metric(res, "outer", "acc", task_manager=local_tm) == pytest.approx(0.3, abs=1e-12)
    # a group row that carries the metric is lm-eval's aggregate: used as written
    assert metric(res, "inner", "acc", task_manager=local_tm) == 0.9
    # a tag: (0.5·4 + 0.25·8 + 1.0·2) / 14
    assert metric(res, "mytag", "acc", task_manager=local_tm) == pytest.approx(6 / 14, abs=1e-12)


def test_missing_member_is_one_line_input_error(local_tm):
    res = results_for({"t0": 0.5, "t1": 0.25, "t3": 0.0}, {"t0": 4, "t1": 8, "t3": 6})
    with pytest.raises(InputError) as e:
        metric(res, "outer", "acc", task_manager=local_tm)
    assert str(e.value) == "lm-eval group 'outer': results have no member task 't2'"
    res = results_for({"t0": 0.5, "t1": 0.25, "t2": 1.0}, {"t0": 4, "t1": 8})
    with pytest.raises(InputError, match="no effective sample count for member 't2'") as e:
        metric(res, "mytag", "acc", task_manager=local_tm)
    assert "\n" not in str(e.value)
    res = results_for({"t0": 0.5, "t1": 0.25, "t2": 1.0}, {"t0": 4, "t1": 8, "t2": 2})
    for t in ("t0", "t2"):                                  # a member that lacks the metric
        res["results"][t]["acc_norm,none"] = 0.5
    with pytest.raises(InputError, match="^lm-eval results for 't1' have no metric 'acc_norm'$"):
        metric(res, "mytag", "acc_norm", task_manager=local_tm)
    with pytest.raises(InputError, match="^lm-eval results have no task 'nope'$"):
        metric(res, "nope", "acc", task_manager=local_tm)


def test_filter_must_be_named_when_ambiguous():
    res = {"results": {"gsm8k": {"exact_match,strict-match": 0.25, "exact_match_stderr,strict-match": "N/A",
                                 "exact_match,flexible-extract": 0.5}}}
    with pytest.raises(InputError, match="ambiguous"):
        metric(res, "gsm8k", "exact_match")
    assert metric(res, "gsm8k", "exact_match,flexible-extract") == 0.5
    assert metric(res, "gsm8k", "exact_match,strict-match") == 0.25


def test_tag_equals_lm_eval_group_aggregate_in_a_real_run(tmp_path):
    """Run lm-eval twice on the same three tasks (5, 9 and 14 documents) with a tiny random
    model: once as a tag, once as a group with a size-weighted aggregate. metric() on the tag
    must equal the aggregate row lm-eval writes for the group."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from methods.core.tokenizer import train_tokenizer

    tok = train_tokenizer(["0123456789+= \n"], kind="char")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, max_position_embeddings=64, pad_token_id=tok.pad_token_id)).eval()
    rng = random.Random(0)
    d = tmp_path / "tasks"
    for i, n in enumerate([5, 9, 14]):
        data = tmp_path / f"t{i}.jsonl"
        data.write_text("".join(json.dumps({"prompt": f"{rng.randint(0, 99)}+{rng.randint(0, 99)}=",
                                            "answer": str(rng.randint(0, 9))}) + "\n" for _ in range(n)))
        path = export_task(d, f"t{i}", data, "loglikelihood")
        path.write_text(path.read_text() + "tag: arith_tag\n")  # (its `!function` tag is not safe_load-able)
    (d / "grp.yaml").write_text(yaml.safe_dump({
        "group": "arith_grp", "task": ["t0", "t1", "t2"], "metadata": {"version": 1},
        "aggregate_metric_list": [{"metric": "perplexity", "weight_by_size": True},
                                  {"metric": "acc", "weight_by_size": True}]}))
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(d), include_defaults=False)
    as_tag = run_lm_eval(model, tok, ["arith_tag"], d, batch_size=8)
    as_group = run_lm_eval(model, tok, ["arith_grp"], d, batch_size=8)
    assert "arith_tag" not in as_tag["results"]                  # why metric() must aggregate
    assert [as_tag["n_samples"][t]["effective"] for t in ("t0", "t1", "t2")] == [5, 9, 14]
    for name in ("perplexity", "acc"):
        lm_eval_agg = as_group["results"]["arith_grp"][f"{name},none"]
        assert metric(as_tag, "arith_tag", name, task_manager=tm) == pytest.approx(lm_eval_agg, abs=1e-12)
    # per-task perplexities differ, so size weighting is visible in the number
    ppl = [as_tag["results"][t]["perplexity,none"] for t in ("t0", "t1", "t2")]
    assert abs(metric(as_tag, "arith_tag", "perplexity", task_manager=tm) - sum(ppl) / 3) > 1e-6
