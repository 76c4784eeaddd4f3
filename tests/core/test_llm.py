"""methods/core/llm.py: HFBackend against a hand-rolled greedy decoder on a tiny random Llama,
OpenAIBackend against a real local HTTP server, and the make_llm factory."""
from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from methods.core.llm import HFBackend, LLMError, OpenAIBackend, cut_at_stop, make_llm
from methods.core.results import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
torch.set_num_threads(1)

PROMPTS = ["a", "Hello, world", "The quick brown fox jumps", "xyz 123"]


# ---------------------------------------------------------------- tiny model + char tokenizer
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + [chr(c) for c in range(32, 127)])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>",
                                  unk_token="<unk>")
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=128, pad_token_id=0, eos_token_id=1,
                      bos_token_id=None, tie_word_embeddings=False, initializer_range=0.2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    d = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    assert (d / "model.safetensors").is_file()
    return d


@pytest.fixture(scope="module")
def hf(tiny_dir):
    return HFBackend(str(tiny_dir), batch_size=16)


def greedy_reference(model, tok, prompt: str, max_new_tokens: int) -> str:
    """Plain unbatched forward passes, argmax token by token, no cache, no padding."""
    ids = tok(prompt)["input_ids"]
    new = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(torch.tensor([ids + new])).logits[0, -1]
            t = int(logits.argmax())
            if t == tok.eos_token_id:
                break
            new.append(t)
    return tok.decode(new, skip_special_tokens=True)


def test_greedy_matches_handrolled_decode_in_one_padded_batch(hf):
    out = hf.generate(PROMPTS, max_new_tokens=12)
    want = [greedy_reference(hf.model, hf.tokenizer, p, 12) for p in PROMPTS]
    assert [len(o) for o in out] == [1] * len(PROMPTS)
    assert [o[0] for o in out] == want
    assert any(w for w in want)  # not vacuous (e.g. all-eos)
    # Batched in chunks of 1 and 3 (different padding) gives the same greedy text.
    for bs in (1, 3):
        assert HFBackend.from_model(hf.model, hf.tokenizer, batch_size=bs).generate(
            PROMPTS, max_new_tokens=12) == out
    # temperature 0 with n > 1: n identical greedy copies.
    assert hf.generate(PROMPTS[:2], max_new_tokens=12, n=3) == [[w] * 3 for w in want[:2]]


def test_from_model_wraps_loaded_pair_and_leaves_tokenizer_untouched(tiny_dir, hf):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    side = tok.padding_side
    llm = HFBackend.from_model(model, tok)
    assert llm.generate(PROMPTS, max_new_tokens=8) == hf.generate(PROMPTS, max_new_tokens=8)
    assert tok.padding_side == side


def test_sampling_is_seeded_and_varies_across_samples(hf):
    kw = dict(max_new_tokens=10, temperature=1.0, n=4)
    a = hf.generate(PROMPTS, seed=123, **kw)
    b = hf.generate(PROMPTS, seed=123, **kw)
    c = hf.generate(PROMPTS, seed=124, **kw)
    assert a == b
    assert a != c
    assert all(len(row) == 4 for row in a)
    assert sum(len(set(row)) > 1 for row in a) >= 1  # samples of one prompt differ
    # Seeding does not disturb the caller's global RNG stream.
    torch.manual_seed(7)
    x = torch.rand(3)
    torch.manual_seed(7)
    hf.generate(PROMPTS[:1], seed=5, **kw)
    assert torch.equal(torch.rand(3), x)


def test_stop_strings_are_cut_and_not_included(hf):
    full = [o[0] for o in hf.generate(PROMPTS, max_new_tokens=16)]
    # Pick a stop string that really occurs mid-completion in the first non-trivial output.
    k, text = next((i, t) for i, t in enumerate(full) if len(t) >= 4)
    stop = text[2:4]
    cut = [o[0] for o in hf.generate(PROMPTS, max_new_tokens=16, stop=[stop, "\x00never"])]
    assert cut[k] == text[: text.index(stop)]
    assert stop not in cut[k]
    for f, c in zip(full, cut):
        assert c == cut_at_stop(f, [stop])
        assert f.startswith(c)


def test_cut_at_stop_earliest_wins():
    assert cut_at_stop("abc. def\nghi", ["\n", "."]) == "abc"
    assert cut_at_stop("abc", ["x"]) == "abc"
    assert cut_at_stop("abc", None) == "abc"
    assert cut_at_stop("abc", [""]) == "abc"


def test_argument_checks(hf):
    assert hf.generate([], max_new_tokens=4) == []
    with pytest.raises(TypeError):
        hf.generate("abc", max_new_tokens=4)
    with pytest.raises(ValueError):
        hf.generate(["a"], max_new_tokens=0)
    with pytest.raises(ValueError):
        hf.generate(["a"], max_new_tokens=4, n=0)


# ---------------------------------------------------------------- local OpenAI-like server
class FakeServer:
    """A real HTTP server on 127.0.0.1:<ephemeral>. It records every request; `fail` is a list
    of status codes to answer first (one per request); after that it answers choices whose text
    names the prompt and sample, in reversed order so the client must group by `index`."""

    def __init__(self):
        self.requests: list[dict] = []
        self.fail: list[int] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(dict(path=self.path, headers=dict(self.headers), body=body))
                if outer.fail:
                    self._send(outer.fail.pop(0), {"error": "busy"})
                    return
                n = body.get("n", 1)
                choices = [{"index": i * n + j, "text": f"{p}|{j}", "finish_reason": "length"}
                           for i, p in enumerate(body["prompt"]) for j in range(n)]
                self._send(200, {"object": "text_completion", "choices": choices[::-1]})

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def test_openai_request_body_path_and_bearer_from_env(server, monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-secret")
    llm = OpenAIBackend(server.base_url + "/", "tiny-model", api_key_env="TEST_LLM_KEY")
    out = llm.generate(["p0", "p1"], max_new_tokens=7, temperature=0.5, stop=["\n"], seed=3)
    assert out == [["p0|0"], ["p1|0"]]
    (req,) = server.requests
    assert req["path"] == "/v1/completions"
    assert req["body"] == {"model": "tiny-model", "prompt": ["p0", "p1"], "max_tokens": 7,
                           "temperature": 0.5, "n": 1, "stop": ["\n"], "seed": 3}
    assert req["headers"]["Authorization"] == "Bearer sk-test-secret"
    assert req["headers"]["Content-Type"] == "application/json"
    assert "sk-test-secret" not in repr(llm) and "sk-test-secret" not in str(vars(llm))


def test_openai_no_key_no_auth_header_and_optional_fields_omitted(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    OpenAIBackend(server.base_url, "m").generate(["x"], max_new_tokens=2)
    (req,) = server.requests
    assert "Authorization" not in req["headers"]
    assert "stop" not in req["body"] and "seed" not in req["body"]


def test_openai_groups_n_choices_by_index_per_prompt(server):
    llm = OpenAIBackend(server.base_url, "m", batch_size=2)
    out = llm.generate(["a", "b", "c"], max_new_tokens=4, temperature=1.0, n=3)
    assert out == [[f"{p}|{j}" for j in range(3)] for p in "abc"]
    # Batched 2 + 1: indices restart per request and are still placed correctly.
    assert [r["body"]["prompt"] for r in server.requests] == [["a", "b"], ["c"]]
    assert all(r["body"]["n"] == 3 for r in server.requests)


def test_openai_stop_is_also_applied_client_side(server):
    out = OpenAIBackend(server.base_url, "m").generate(["ab"], max_new_tokens=4, stop=["|"])
    assert out == [["ab"]]


def test_openai_retries_after_503_then_succeeds(server):
    server.fail = [503]
    llm = OpenAIBackend(server.base_url, "m", max_retries=3, backoff=0.01)
    assert llm.generate(["q"], max_new_tokens=1) == [["q|0"]]
    assert len(server.requests) == 2


def test_openai_clear_error_after_repeated_failures(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    server.fail = [503] * 10
    llm = OpenAIBackend(server.base_url, "m", max_retries=2, backoff=0.01)
    with pytest.raises(LLMError) as e:
        llm.generate(["q"], max_new_tokens=1)
    msg = str(e.value)
    assert server.base_url + "/completions" in msg and "503" in msg and "3 attempts" in msg
    assert "sk-never-shown" not in msg
    assert len(server.requests) == 3


def test_openai_client_error_is_not_retried(server):
    server.fail = [400]
    with pytest.raises(LLMError, match="HTTP 400"):
        OpenAIBackend(server.base_url, "m", backoff=0.01).generate(["q"], max_new_tokens=1)
    assert len(server.requests) == 1


def test_openai_connection_refused_is_retried_then_reported():
    with socket.socket() as s:  # a port that nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=0.01,
                        timeout=5)
    with pytest.raises(LLMError, match=f"127.0.0.1:{port}/v1/completions.*2 attempts"):
        llm.generate(["q"], max_new_tokens=1)


def test_openai_malformed_choices_raise():
    llm = OpenAIBackend("http://127.0.0.1:9/v1", "m")
    # Too few choices, or duplicate indices: an error, never a silently misaligned result.
    with pytest.raises(LLMError, match="malformed"):
        llm._group({"choices": [{"index": 0, "text": "a"}]}, n_prompts=1, n=2)
    with pytest.raises(LLMError, match="malformed"):
        llm._group({"choices": [{"index": 0, "text": "a"}, {"index": 0, "text": "b"}]}, 1, 2)


# ---------------------------------------------------------------- factory + import cost
def test_make_llm_builds_backends(tiny_dir, hf):
    llm = make_llm({"backend": "hf", "model": str(tiny_dir), "batch_size": 2})
    assert isinstance(llm, HFBackend) and llm.batch_size == 2
    assert llm.generate(PROMPTS[:2], max_new_tokens=6) == hf.generate(PROMPTS[:2],
                                                                      max_new_tokens=6)
    o = make_llm({"backend": "openai", "base_url": "http://h:1/v1", "model": "m",
                  "api_key_env": "X_KEY", "max_retries": 5})
    assert isinstance(o, OpenAIBackend)
    assert (o.url, o.model, o.api_key_env, o.max_retries) == ("http://h:1/v1/completions", "m",
                                                              "X_KEY", 5)


@pytest.mark.parametrize("spec, words", [
    ({"backend": "vllm-magic", "model": "m"}, ["vllm-magic"]),
    ({"model": "m"}, ["None"]),
    ({"backend": "openai", "model": "m"}, ["base_url"]),
    ({"backend": "hf"}, ["model"]),
    ({"backend": "openai", "base_url": "u", "model": "m", "api_key": "sk"}, ["api_key", "env"]),
])
def test_make_llm_bad_spec_is_one_line_input_error(spec, words):
    with pytest.raises(InputError) as e:
        make_llm(spec)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words)


def test_importing_llm_does_not_import_torch():
    code = ("import sys, methods.core.llm as m; m.OpenAIBackend('http://x/v1', 'm'); "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=60)
