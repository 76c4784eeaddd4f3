"""A small OpenAI-compatible HTTP server of ours that serves any `methods.core.llm` backend
(typically a tiny local model) on 127.0.0.1, for tests, benchmarks and the tiny DAG.

Endpoints: GET /v1/models; POST /v1/completions (prompt: str | list[str], n, max_tokens,
temperature, top_p, stop, seed, echo, logprobs — with echo+logprobs the prompt tokens carry their
log-probs, as on vLLM); POST /v1/chat/completions (messages, n, max_tokens, temperature, top_p,
stop, seed). Bodies follow the OpenAI schema closely enough for `OpenAIBackend` (both
transports) and the `openai` client.

Fault injection for tests (`faults`, consumed one per request, in order): an int answers that
HTTP status; "sleep:<s>" delays the answer by s seconds; "garbage" answers a 200 that is not JSON;
"nochoices" answers JSON without choices. `latency_s` adds a fixed delay to every answer
*outside* the model lock (a stand-in for network/queueing latency of a remote server), so
concurrent clients overlap it. The backend itself is called under one lock (torch models are
not re-entrant here).

    python -m methods.core.llm_server --model DIR [--port 0] [--latency-s 0]
"""
from __future__ import annotations

import argparse
import http.server
import json
import sys
import threading
import time
from typing import Any


class LLMServer:
    """`with LLMServer(backend) as srv: srv.base_url` -> "http://127.0.0.1:<port>/v1"."""

    def __init__(self, backend, *, model_name: str = "local", host: str = "127.0.0.1",
                 port: int = 0, latency_s: float = 0.0, faults: list | None = None):
        self.backend, self.model_name, self.latency_s = backend, model_name, latency_s
        self.faults = list(faults or [])
        self.requests: list[dict] = []
        self._lock, self._flock = threading.Lock(), threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # keep-alive clients (httpx in `openai`) would otherwise wait ~40 ms per answer on
            # Nagle + delayed ACK between the header and body writes
            disable_nagle_algorithm = True

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": outer.model_name, "object": "model", "owned_by": "icml26-repro"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                except (ValueError, json.JSONDecodeError):
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                outer.requests.append({"path": self.path, "body": body})
                with outer._flock:
                    fault = outer.faults.pop(0) if outer.faults else None
                if isinstance(fault, str) and fault.startswith("sleep:"):
                    time.sleep(float(fault.split(":", 1)[1]))
                    fault = None
                if isinstance(fault, int):
                    self._send(fault, {"error": {"message": f"injected fault {fault}"}})
                    return
                if fault == "garbage":
                    self._raw(200, b"<html>not json</html>", "text/html")
                    return
                if fault == "nochoices":
                    self._send(200, {"object": "text_completion"})
                    return
                try:
                    route = self.path.rstrip("/")
                    if route == "/v1/completions":
                        obj = outer._completions(body)
                    elif route == "/v1/chat/completions":
                        obj = outer._chat(body)
                    else:
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                except (KeyError, TypeError, ValueError) as e:
                    self._send(400, {"error": {"message": f"bad request: {e}"}})
                    return
                if outer.latency_s:
                    time.sleep(outer.latency_s)
                self._send(200, obj)

            def _send(self, code, obj):
                self._raw(code, json.dumps(obj).encode(), "application/json")

            def _raw(self, code, data, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------------ endpoints
    @staticmethod
    def _sampling(body: dict) -> dict:
        kw: dict[str, Any] = dict(max_new_tokens=int(body.get("max_tokens", 16)),
                                  temperature=float(body.get("temperature", 1.0)),
                                  n=int(body.get("n", 1)), top_p=float(body.get("top_p", 1.0)))
        stop = body.get("stop")
        kw["stop"] = [stop] if isinstance(stop, str) else stop
        if body.get("seed") is not None:
            kw["seed"] = int(body["seed"])
        return kw

    def _completions(self, body: dict) -> dict:
        prompts = body["prompt"]
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        if not all(isinstance(p, str) for p in prompts):
            raise TypeError("prompt must be a string or a list of strings")
        kw = self._sampling(body)
        echo, want_lp = bool(body.get("echo")), body.get("logprobs") is not None
        with self._lock:
            texts = self.backend.generate(prompts, **kw)
            lps = self.backend.token_logprobs(prompts) if echo and want_lp else None
        choices = []
        for i, p in enumerate(prompts):
            for j, t in enumerate(texts[i]):
                c: dict[str, Any] = {"index": i * kw["n"] + j, "text": (p + t) if echo else t,
                                     "finish_reason": "length", "logprobs": None}
                if lps is not None:
                    # prompt tokens with their log-probs; the generated text as one trailing
                    # entry without one (its offset is past the prompt, so scorers drop it)
                    r = lps[i]
                    c["logprobs"] = {"tokens": r["tokens"] + ([t] if t else []),
                                     "token_logprobs": r["logprobs"] + ([None] if t else []),
                                     "text_offset": r["offsets"] + ([len(p)] if t else []),
                                     "top_logprobs": None}
                choices.append(c)
        return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion",
                "created": int(time.time()), "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def _chat(self, body: dict) -> dict:
        messages = body["messages"]
        kw = self._sampling(body)
        with self._lock:
            texts = self.backend.chat([messages], **kw)[0]
        choices = [{"index": j, "message": {"role": "assistant", "content": t},
                    "finish_reason": "stop", "logprobs": None} for j, t in enumerate(texts)]
        return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
                "created": int(time.time()), "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "LLMServer":
        """Serve in a background thread; a second call (`with LLMServer(...).start()`) is a no-op.
        Two serving loops on one server would outlive `close`: `shutdown` stops one of them, and the
        other then polls the closed socket in a busy loop."""
        if self.thread is None:
            self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
            self.thread.start()
        return self

    def close(self) -> None:
        if self.thread is not None:  # shutdown() waits for a serving loop: only when one runs
            self.httpd.shutdown()
            self.thread.join(timeout=5)
            self.thread = None
        self.httpd.server_close()

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="llm_server", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="local model directory (safetensors)")
    ap.add_argument("--name", default="local")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--latency-s", type=float, default=0.0)
    a = ap.parse_args(argv)
    from .llm import HFBackend

    srv = LLMServer(HFBackend(a.model), model_name=a.name, port=a.port, latency_s=a.latency_s)
    print(f"serving {a.model} at {srv.base_url}", file=sys.stderr)
    try:
        srv.httpd.serve_forever(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
