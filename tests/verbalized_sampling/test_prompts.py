"""Prompt variants, parsing and repair of verbalized lists, selection, tiny chat template."""
from __future__ import annotations

import pytest

from methods.verbalized_sampling import prompts as P


@pytest.mark.parametrize("value, want", [("70%", 0.70), ("0.3", 0.3), (0.25, 0.25), (-0.2, 0.0),
                                         (1.7, 1.0), ("abc", 0.0), (None, 0.0), ("12.5 %", 0.125),
                                         (True, 0.0), (float("nan"), 0.0)])
def test_repair_probability(value, want):
    assert P.repair_probability(value) == pytest.approx(want)


def test_parse_json_in_fences_with_reasoning_and_repair():
    text = ('Sure!\n```json\n{"reasoning": "think {carefully}", "responses": ['
            '{"text": " A cat ", "probability": "40%"}, {"text": "B", "probability": 1.5}, '
            '{"text": "", "probability": 0.2}, {"text": "C", "probability": "n/a"}, "D"]}\n```')
    items = P.parse_verbalized(text)
    assert items == [{"text": "A cat", "probability": 0.4}, {"text": "B", "probability": 1.0},
                     {"text": "C", "probability": 0.0}, {"text": "D", "probability": None}]


def test_parse_python_list_and_tiny_format():
    assert [i["text"] for i in P.parse_verbalized('["x y", "z"]')] == ["x y", "z"]
    items = P.parse_verbalized("lazy cats sing moon p21 ; shy cats fly attic p08 ; ; bad")
    assert items == [{"text": "lazy cats sing moon", "probability": 0.21},
                     {"text": "shy cats fly attic", "probability": 0.08},
                     {"text": "bad", "probability": None}]


def test_select_threshold_relaxes_and_renormalises():
    items = [{"text": t, "probability": p} for t, p in
             [("a", 0.5), ("b", 0.2), ("c", 0.05), ("d", 0.01), ("e", 0.3)]]
    out = P.select(items, tau=0.12)
    assert [i["text"] for i in out] == ["a", "e", "b"]
    assert [i["weight"] for i in out] == pytest.approx([0.5, 0.3, 0.2])
    # tau too high: keep the 3 most probable anyway
    out = P.select(items, tau=0.9)
    assert [i["text"] for i in out] == ["a", "e", "b"]
    assert sum(i["weight"] for i in P.select(items, mode="uniform")) == pytest.approx(1.0)
    assert [i["weight"] for i in P.select(items, mode="uniform")] == pytest.approx([1 / 3] * 3)


def test_messages_calls_and_tail_clause():
    m = P.messages("vs_standard", "Tell me a joke about cats", k=5, p_threshold=0.1)
    assert m[0]["role"] == "system" and "5 responses" in m[0]["content"]
    assert "probability below 0.1." in m[0]["content"]
    assert "below" not in P.messages("vs_standard", "q", p_threshold=-1)[0]["content"]
    assert P.calls_per_prompt("vs_multi", 30, 5, 2) == (6, [2, 2, 1])
    assert P.calls_per_prompt("direct", 30, 5) == (30, [1])
    assert P.calls_per_prompt("sequence", 30, 5) == (6, [5])
    assert P.calls_per_prompt("multi_turn", 4, 5) == (1, [1, 1, 1, 1])
    assert "2 alternative" in P.followup("vs_multi", 2)["content"]
    with pytest.raises(ValueError):
        P.messages("nope", "q")


def test_tiny_chat_format_maps_methods():
    q = "Tell me a joke about cats"
    assert P.tiny_chat_format(P.messages("direct", q)) == "direct cats :"
    assert P.tiny_chat_format(P.messages("sequence", q)) == "sequence cats :"
    assert P.tiny_chat_format(P.messages("vs_standard", q)) == "vs cats :"
    assert {P.method_of(P.messages(m, q)) for m in P.METHODS} >= {
        "direct", "direct_cot", "sequence", "vs_standard", "vs_cot", "vs_multi"}
    with pytest.raises(ValueError):
        P.tiny_chat_format(P.messages("vs_cot", q))


def test_direct_cot_and_schemas():
    assert P.parse_single("direct_cot", 'x {"reasoning": "r", "response": " hi "} y') == "hi"
    assert P.parse_single("direct", " hi ") == "hi"
    assert P.json_schema("vs_cot")["required"] == ["reasoning", "responses"]
    assert P.json_schema("direct") is None
    assert P.json_schema("vs_standard")["properties"]["responses"]["items"]["required"] == [
        "text", "probability"]
