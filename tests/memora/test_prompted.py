"""PromptedMemoraLLM through the core LLM interface (a scripted LLM subclass standing in for a
served model), and its use inside Memora's build."""
import json

from methods.core.llm import LLM
from methods.memora import memory
from methods.memora.prompted import PromptedMemoraLLM, parse_json


class ScriptedLLM(LLM):
    """Replies chosen by the prompt's kind; records every prompt."""

    def __init__(self):
        self.prompts = []

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed, top_p=1.0):
        out = []
        for p in prompts:
            self.prompts.append(p)
            if "extract the factual memories" in p:
                r = {"memories": [{"index": "Jane's city of residence", "value": "Jane lives in Oslo."}]}
            elif "same thing" in p:
                r = {"match": 1}
            elif "Merge" in p:
                r = {"index": "Jane's city of residence", "value": "Jane lives in Oslo (again)."}
            elif "cue anchors" in p:
                r = {"anchors": ["Jane city", "Jane's city of residence", "Jane home life", "x"]}
            else:
                r = {"sufficient": False, "bridges": ["Carol", "Jane"]}
            out.append(["Sure! " + json.dumps(r)] * n)
        return out


def test_parse_json():
    assert parse_json('text {"a": [1, {"b": 2}]} tail') == {"a": [1, {"b": 2}]}
    assert parse_json("no json") == {} and parse_json("{bad json}") == {}


def test_prompted_build_consolidates_and_filters_anchors():
    llm = PromptedMemoraLLM(ScriptedLLM())
    conv = {"conv_id": "x", "speakers": ["Jane", "Tom"], "sessions": [{"session": 1, "date": "2023-01-02", "turns": [
        {"dia_id": "D1:1", "speaker": "Jane", "text": "I live in Oslo."},
        {"dia_id": "D1:2", "speaker": "Jane", "text": "Oslo is home."}]}]}
    emb = memory.EmbeddingCache(fallback=lambda: memory.HashEmbedder())
    st = memory.build_memora(conv, llm, emb, memory.BuildConfig(consolidate_k=5, gamma=0.7, chunk_turns=3))
    [e] = st.entries.values()
    assert e.value == "Jane lives in Oslo (again)." and e.sources == ["D1:1", "D1:2"] and st.n_updates == 1
    assert e.anchors == ["Jane city", "Jane home life"]      # equal-to-index and 1-word anchors dropped
    assert "2023-01-02" in llm.llm.prompts[0]                 # session date given for absolute dates
    q = "Where does Jane's sister live?"
    assert llm.bridges(q, [e.value]) == ["Carol"] and llm.sufficient(q, [e]) is False
