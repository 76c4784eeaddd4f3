"""OpenAIBackend against a misbehaving server: a fault-injecting HTTP server on 127.0.0.1 answers
each request with the next scripted fault (a truncated body, a body that is not JSON, a slow drip
of bytes, an HTTP error with or without Retry-After, a dropped connection, an error body echoing
the request's Authorization header) and records when each request arrived.

What must hold, on both transports (`urllib` and the `openai` package): transient faults are
retried and then succeed, or end as an `LLMError` after max_retries + 1 attempts; malformed
answers and other 4xx are one `LLMError` at once (one request seen); `timeout` bounds a whole
request, slow drip included; Retry-After is honoured; no error message carries the key; bad
numbers in a spec are a one-line InputError naming the key. Times are bounds on correctness
(deadline + generous slack), not speed measurements."""
from __future__ import annotations

import datetime
import email.utils
import http.server
import json
import threading
import time

import pytest

from methods.core import cli
from methods.core.llm import LLMError, OpenAIBackend, _redact, _retry_after_s, make_llm
from methods.core.results import InputError

TRANSPORTS = ["urllib", "openai"]
SLACK_S = 3.0  # allowance over a deadline for thread start-up and a loaded machine


def _completion(body: dict) -> dict:
    """A well-formed /completions or /chat/completions answer naming prompt and sample."""
    n = body.get("n", 1)
    if "messages" in body:
        return {"object": "chat.completion", "model": "m", "created": 0, "id": "c",
                "choices": [{"index": j, "finish_reason": "length",
                             "message": {"role": "assistant", "content": f"chat|{j}"}}
                            for j in range(n)]}
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    return {"object": "text_completion", "model": "m", "created": 0, "id": "c",
            "choices": [{"index": i * n + j, "text": f"{p}|{j}", "finish_reason": "length",
                         "logprobs": None}
                        for i, p in enumerate(prompts) for j in range(n)]}


class FaultServer:
    """A real HTTP server; `script` holds one action per request, consumed in order (then "ok"):
    "ok"; "truncate" (a 200 whose Content-Length promises more than is sent, then the connection
    closes); "badjson"; "json:<text>" (a 200 with that body); "drip" (a valid answer, one byte
    every 0.1 s); "drip-head" (the status line itself dripped); "drop" (the connection closed
    without an answer); (code, headers) (an error status with a JSON error message);
    ("echo", code) (an error whose body, JSON and text, echoes the request's Authorization)."""

    def __init__(self):
        self.script: list = []
        self.seen: list[dict] = []  # {"t": monotonic arrival, "path", "auth"}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.seen.append({"t": time.monotonic(), "path": self.path,
                                   "auth": self.headers.get("Authorization")})
                act = outer.script.pop(0) if outer.script else "ok"
                good = json.dumps(_completion(body)).encode()
                try:
                    self._act(act, good)
                except OSError:  # the client gave up (a deadline): stop writing
                    self.close_connection = True

            def _act(self, act, good):
                if act == "ok":
                    return self._send(200, good)
                if act == "badjson":
                    return self._send(200, b'{"choices": [ not json')
                if isinstance(act, str) and act.startswith("json:"):
                    return self._send(200, act[5:].encode())
                if act == "truncate":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(good)))
                    self.end_headers()
                    self.wfile.write(good[:len(good) // 2])
                    self.close_connection = True
                    return None
                if act == "drop":
                    self.close_connection = True
                    return None
                if act in ("drip", "drip-head"):
                    head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            f"Content-Length: {len(good)}\r\nConnection: close\r\n\r\n").encode()
                    if act == "drip":
                        self.wfile.write(head)
                        self.wfile.flush()
                    data = good if act == "drip" else head + good
                    for k in range(len(data)):  # ~0.1 s a byte: seconds past any deadline here
                        self.wfile.write(data[k:k + 1])
                        self.wfile.flush()
                        time.sleep(0.1)
                    self.close_connection = True
                    return None
                if isinstance(act, tuple) and act[0] == "echo":
                    auth = self.headers.get("Authorization", "")
                    text = f"bad credentials; you sent Authorization: {auth}"
                    body = json.dumps({"error": {"message": text, "headers": dict(self.headers)},
                                       "raw": text}).encode()
                    return self._send(act[1], body)
                code, headers = act
                return self._send(code, json.dumps({"error": {"message": f"fault {code}"}}).encode(),
                                  headers)

            def _send(self, code, data, headers=None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def srv():
    s = FaultServer()
    yield s
    s.close()


def _llm(srv, transport, **kw) -> OpenAIBackend:
    kw = {"timeout": 10, "max_retries": 2, "backoff": 0.01, "api_key_env": None, **kw}
    return OpenAIBackend(srv.base_url, "m", transport=transport, **kw)


CHAT = [[{"role": "user", "content": "hi"}]]


# ------------------------------------------------------------------ transient faults, retried
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault", ["truncate", "drop", (503, {}), (502, {}), (429, {}), (408, {})])
def test_transient_fault_then_success(srv, transport, fault):
    srv.script = [fault, fault]
    assert _llm(srv, transport).generate(["a", "b"], max_new_tokens=2, n=2) == \
        [["a|0", "a|1"], ["b|0", "b|1"]]
    assert len(srv.seen) == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_truncated_body_every_time_is_llm_error(srv, transport):
    srv.script = ["truncate"] * 3
    with pytest.raises(LLMError, match=r"/v1/chat/completions failed after 3 attempts: "
                                       r"(truncated body|connection error)") as e:
        _llm(srv, transport).chat(CHAT, max_new_tokens=2)
    assert "\n" not in str(e.value)
    assert len(srv.seen) == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_after_is_honoured(srv, transport):
    srv.script = [(429, {"Retry-After": "1"})]
    assert _llm(srv, transport, backoff=0.01).chat(CHAT, max_new_tokens=2) == [["chat|0"]]
    first, second = srv.seen
    assert second["t"] - first["t"] >= 0.95  # the server's clocks: asked 1 s, back-off 0.01 s


def test_retry_after_forms_and_cap():
    now = datetime.datetime.now(datetime.timezone.utc)
    date = email.utils.format_datetime(now + datetime.timedelta(seconds=30), usegmt=True)
    past = email.utils.format_datetime(now - datetime.timedelta(seconds=30), usegmt=True)
    assert _retry_after_s({"retry-after": "2.5"}) == 2.5
    assert 28 <= _retry_after_s({"retry-after": date}) <= 30  # HTTP-date: 1 s resolution
    assert _retry_after_s({"retry-after": past}) == 0.0
    assert _retry_after_s({"retry-after": "86400"}) == 60.0  # capped
    assert _retry_after_s({"retry-after-ms": "250"}) == 0.25
    for bad in ({}, {"retry-after": "soon"}, {"retry-after": "nan"}, None):
        assert _retry_after_s(bad) is None


# ------------------------------------------------------------------ a whole-request deadline
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault", ["drip", "drip-head"])
def test_slow_drip_ends_at_the_deadline(srv, transport, fault):
    srv.script = [fault]
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="1 attempts: timeout"):
        _llm(srv, transport, timeout=1.0, max_retries=0).generate(["a"], max_new_tokens=2)
    assert time.monotonic() - t0 < 1.0 + SLACK_S  # the full drip takes > 20 s


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_slow_drip_then_retry_succeeds(srv, transport):
    srv.script = ["drip"]
    t0 = time.monotonic()
    assert _llm(srv, transport, timeout=1.0, max_retries=1).generate(["a"], max_new_tokens=2) \
        == [["a|0"]]
    assert time.monotonic() - t0 < 2 * 1.0 + SLACK_S
    assert len(srv.seen) == 2


# ------------------------------------------------------------------ permanent faults, not retried
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault, words", [
    ("badjson", "response is not JSON"),
    ("json:[1, 2]", "malformed response"),
    ('json:{"choices": [{"index": [0], "text": "a"}]}', "malformed response"),
    ('json:{"choices": [{"index": 0, "text": "a|0"}]}', "malformed response"),  # n=2 asked
    ('json:{"choices": [{"index": 0}, {"index": 1}]}', "malformed response"),
])
def test_malformed_answer_is_llm_error_at_once(srv, transport, fault, words):
    srv.script = [fault]
    with pytest.raises(LLMError, match=words) as e:
        _llm(srv, transport).generate(["a"], max_new_tokens=2, n=2)
    assert "\n" not in str(e.value) and "not json" not in str(e.value)  # the body is not echoed
    assert len(srv.seen) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_malformed_logprobs_are_llm_error(srv, transport):
    srv.script = ['json:{"choices": [{"index": 0, "logprobs": {"text_offset": [0, "x"], '
                  '"token_logprobs": [null, "y"]}}]}']
    with pytest.raises(LLMError, match="malformed response"):
        _llm(srv, transport).score(["ab"], ["c"])


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("code", [400, 401, 403, 404])
def test_client_errors_are_not_retried(srv, transport, code):
    srv.script = [(code, {})]
    with pytest.raises(LLMError) as e:
        _llm(srv, transport, max_retries=3).chat(CHAT, max_new_tokens=2)
    msg = str(e.value)
    assert "\n" not in msg and f"HTTP {code}" in msg and f"fault {code}" in msg
    assert srv.base_url + "/chat/completions" in msg
    assert len(srv.seen) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("key", ["sk-proj-Zq81secretABCDEF", "opaque-token-77f3c2e1"])
@pytest.mark.parametrize("code", [401, 500])
def test_error_messages_never_carry_the_key(srv, transport, key, code, monkeypatch):
    monkeypatch.setenv("FAULT_TEST_KEY", key)
    srv.script = [("echo", code)] * 3
    with pytest.raises(LLMError) as e:
        _llm(srv, transport, api_key_env="FAULT_TEST_KEY").generate(["a"], max_new_tokens=2)
    msg = str(e.value)
    assert srv.seen[0]["auth"] == f"Bearer {key}"  # the server did get (and echo) it
    assert key not in msg and key[:12] not in msg, msg
    assert f"HTTP {code}" in msg and "bad credentials" in msg  # the short reason survives
    assert len(srv.seen) == (1 if code == 401 else 3)


def test_redact_removes_credentials():
    text = ("auth failed: Authorization: Bearer abc.def-ghi, api_key=xyz123, "
            "key sk-ant-api03-QWERTY, token " + "T0KEN1234")
    out = _redact(text, key="T0KEN1234")
    for secret in ("abc.def-ghi", "xyz123", "QWERTY", "T0KEN1234"):
        assert secret not in out, out
    assert out.startswith("auth failed:")
    assert len(_redact("x" * 1000)) <= 160 and "\n" not in _redact("a\nb\r\nc")


# ------------------------------------------------------------------ spec numbers and the CLI
@pytest.mark.parametrize("key, value", [("timeout", -1), ("timeout", 0), ("timeout", "60"),
                                        ("max_retries", -1), ("max_retries", 1.5),
                                        ("concurrency", 0), ("batch_size", 0),
                                        ("backoff", -0.5), ("timeout", float("inf")),
                                        ("max_retries", True)])
def test_make_llm_rejects_bad_numbers(key, value):
    with pytest.raises(InputError) as e:
        make_llm({"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                  key: value})
    msg = str(e.value)
    assert "\n" not in msg and repr(key) in msg


def test_make_llm_accepts_good_numbers():
    o = make_llm({"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                  "timeout": 5, "max_retries": 0, "concurrency": 2, "backoff": 0})
    assert (o.timeout, o.max_retries, o.concurrency, o.backoff) == (5.0, 0, 2, 0.0)


def test_cli_turns_llm_error_into_one_line_exit_2(capsys):
    parser, sub = cli.subcommands("prog", "d")

    def fail(args):
        raise LLMError("POST http://h/v1/completions failed:\nHTTP 401 Unauthorized")

    sub.add_parser("step").set_defaults(func=fail)
    assert cli.main(parser, ["step"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == ("prog step: error: LLM endpoint: POST http://h/v1/completions failed: "
                   "HTTP 401 Unauthorized\n")
