"""Memora's data structures and retrieval against references: flat RAG (Theorem D.1, exact),
brute-force numpy and scikit-learn NearestNeighbors (cosine top-k), hand-built stores."""
import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from methods.memora import memory, synth

SMALL = synth.SynthConfig(n_conversations=2, n_sessions=6, turns_per_session=10, filler_fraction=0.4,
                          max_mentions=2, n_events=2, update_session=3, start_date="2023-05-01", seed=3)


@pytest.fixture(scope="module")
def data():
    return synth.generate(SMALL)


def test_theorem_d1_memora_reduces_to_rag_exactly(data):
    convs, qas = data
    embed = memory.EmbeddingCache(fallback=lambda: memory.HashEmbedder())
    llm, pc = memory.TemplateMemoraLLM(), memory.PolicyConfig(k=5, expand=2, budget=4)
    n = 0
    for c in convs:
        chunks = memory.rag_chunks(c, 3)
        rag, mem = memory.RAGIndex(chunks, embed), memory.rag_as_memora(chunks, embed)
        for q in (q for q in qas if q["conv_id"] == c["conv_id"]):
            a = rag.search(embed([q["question"]])[0], pc.k)
            b = memory.retrieve(mem, q["question"], embed, "semantic", llm, pc)
            assert [i for i, _ in a] == b["ids"]            # same ids, same order
            assert [s for _, s in a] == b["scores"]         # bit-identical scores
            assert b["evidence"] == sorted({t for i, _ in a for t in chunks[i][1]})
            n += 1
    assert n == len(qas) > 20


def test_cosine_topk_matches_sklearn_and_numpy():
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(300, 24)).astype(np.float32)
    for _ in range(5):
        q = rng.normal(size=24).astype(np.float32)
        idx, sc = memory.cosine_topk(mat, q, 7)
        nn = NearestNeighbors(n_neighbors=7, metric="cosine", algorithm="brute").fit(mat)
        dist, ref = nn.kneighbors(q[None])
        assert idx.tolist() == ref[0].tolist()
        np.testing.assert_allclose(sc, 1 - dist[0], atol=1e-5)
        brute = [float(mat[i] @ q / np.linalg.norm(mat[i]) / np.linalg.norm(q)) for i in range(300)]
        np.testing.assert_allclose(sc, sorted(brute, reverse=True)[:7], atol=1e-5)


def test_cosine_topk_ties_by_lower_index():
    mat = np.array([[1, 0], [0, 1], [1, 0], [2, 0]], dtype=np.float32)
    idx, sc = memory.cosine_topk(mat, np.array([1, 0], np.float32), 3)
    assert idx.tolist() == [0, 2, 3] and np.allclose(sc, 1.0)


def _store(anchors=True):
    emb = memory.EmbeddingCache(fallback=lambda: memory.HashEmbedder(64))
    st = memory.Store("t", emb, anchors)
    st.add("Alice's sister", "Alice's sister is Carol.", ["D1:1"], anchors=["Alice sister", "Carol life"])
    st.add("Carol's pet", "Carol has a beagle.", ["D2:4"], anchors=["Carol pet", "Carol life"])
    st.add("Alice's pet", "Alice has a corgi.", ["D1:5"], anchors=["Alice pet", "Alice life"])
    return st, emb


def test_anchor_search_score_is_max_over_abstraction_and_anchors():
    st, emb = _store()
    q = emb(["Carol life"])[0]
    got = dict(st.search(q, 3))
    for e in st.entries.values():
        ref = max(float(emb([t])[0] @ q) for t in [e.abstraction, *e.anchors])
        assert got[e.id] == pytest.approx(ref, abs=1e-6)
    assert got[1] == pytest.approx(1.0, abs=1e-6)      # an exact anchor hit


def test_anchor_links_relink_and_prune():
    st, _ = _store()
    assert st.neighbours(0) == {1} and st.neighbours(2) == set()
    st.set_anchors(st.entries[1], ["Carol pet"])       # drop "Carol life" from entry 1
    assert st.links["Carol life"] == {0} and st.neighbours(0) == set()
    st.remove(0)
    assert "Carol life" not in st.links and "Alice sister" not in st.links   # empty anchors pruned
    assert set(st.links) == {"Carol pet", "Alice pet", "Alice life"}


def test_policy_walks_anchor_to_bridge_and_noanchor_cannot():
    llm = memory.TemplateMemoraLLM()
    q = "What pet does Alice's sister have?"
    pc = memory.PolicyConfig(k=1, expand=1, budget=4)
    st, emb = _store(True)
    r = memory.retrieve(st, q, emb, "policy", llm, pc)
    assert r["ids"][0] == 0 and 1 in r["ids"]
    assert r["actions"] == ["QUERY", "REFINE", "EXPAND", "STOP"]
    assert r["final_query"] == q + " Carol"
    st2, emb2 = _store(False)
    r2 = memory.retrieve(st2, q, emb2, "policy", llm, pc)
    assert r2["ids"] == [0] and r2["actions"] == ["QUERY", "REFINE", "STOP"]   # empty frontier


def test_budget_bounds_the_walk():
    llm = memory.TemplateMemoraLLM()
    st, emb = _store(True)
    r = memory.retrieve(st, "What pet does Alice's sister have?", emb, "policy", llm,
                        memory.PolicyConfig(k=1, expand=1, budget=1))
    assert r["actions"] == ["QUERY", "REFINE", "STOP"] and r["ids"] == [0]


def test_consolidation_merges_updates_and_keeps_sources(data):
    convs, qas = data
    emb = memory.EmbeddingCache(fallback=lambda: memory.HashEmbedder())
    llm = memory.TemplateMemoraLLM()
    c = convs[0]
    mem = memory.build_memora(c, llm, emb, memory.BuildConfig(consolidate_k=5, gamma=0.7, chunk_turns=3))
    fs = memory.build_factstore(c, llm, emb)
    # every extracted fact is in exactly one memora entry; no two entries share (entity, aspect)
    assert sorted(s for e in mem.entries.values() for s in e.sources) == sorted(s for e in fs.entries.values() for s in e.sources)
    keys = [(e.meta["entity"], e.meta["aspect"]) for e in mem.entries.values()]
    assert len(keys) == len(set(keys)) == len({(e.meta["entity"], e.meta["aspect"]) for e in fs.entries.values()})
    assert mem.n_updates == len(fs.entries) - len(mem.entries)
    # the updated attribute's entry states the latest value first
    for q in (q for q in qas if q["conv_id"] == c["conv_id"] and q["category"] == "knowledge_update"):
        e = next(e for e in mem.entries.values() if q["answer"] in e.value and q["stale"] in e.value)
        assert e.value.index(q["answer"]) < e.value.index(q["stale"])
        assert set(q["evidence"]) <= set(e.sources)


def test_template_extraction_resolves_speaker_and_relative_date():
    llm = memory.TemplateMemoraLLM()
    [c] = llm.extract("Guess what, I ran a marathon yesterday! Wow, really?", "Maya", "2023-06-15", "D3:2")
    assert (c.abstraction, c.value) == ("Maya ran a marathon", "Maya ran a marathon on 14 June 2023.")
    [c] = llm.extract("My sister Zoe called me today.", "Bob", "2023-06-15", "D1:1")
    assert c.value == "Bob's sister is Zoe." and llm.anchors(c.abstraction, c.value, c.meta) == ["Bob sister", "Bob life", "Zoe life"]
    assert llm.extract("Haha, that sounds fun!", "Bob", "2023-06-15", "D1:2") == []


def test_embedding_cache_only_embeds_misses():
    calls = []

    def fallback():
        h = memory.HashEmbedder(16)
        return lambda texts: calls.append(list(texts)) or h(texts)
    cache = memory.EmbeddingCache(["a b"], memory.HashEmbedder(16)(["a b"]), fallback=fallback)
    v = cache(["a b", "c", "a b"])
    assert calls == [["c"]] and cache.misses == 1
    np.testing.assert_array_equal(v[0], v[2])
    cache(["c"])
    assert calls == [["c"]]
    with pytest.raises(KeyError):
        memory.EmbeddingCache(["x"], np.ones((1, 4), np.float32))(["y"])
