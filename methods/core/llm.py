"""The harness's one text-generation interface: `LLM.generate`, with two backends.

- `HFBackend`: a local transformers causal LM (batched, left-padded, seeded sampling).
- `OpenAIBackend`: an OpenAI-compatible `/completions` endpoint (e.g. a vLLM server), standard
  library only, so steps that only talk to a server never import torch.

Both return, for each prompt, `n` completions (completion text only), cut before the first stop
string. temperature 0 means greedy. Sampling is pure temperature sampling (no top-k/top-p) on
both backends so the two mean the same thing by "temperature". `make_llm(spec)` builds one from a
config dict. torch/transformers are imported inside HFBackend only.
"""
from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from typing import Any

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


class LLM:
    """Abstract base: subclasses implement `_generate`; argument checks live here, once."""

    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float = 0.0,
                 n: int = 1, stop: list[str] | None = None,
                 seed: int | None = None) -> list[list[str]]:
        if isinstance(prompts, str):  # a bare string would be generated per character
            raise TypeError("prompts must be a list of strings, not a str")
        if max_new_tokens < 1 or n < 1 or temperature < 0:
            raise ValueError(f"need max_new_tokens>=1, n>=1, temperature>=0; got "
                             f"{max_new_tokens}, {n}, {temperature}")
        if not prompts:
            return []
        stop = [s for s in (stop or []) if s] or None
        out = self._generate(list(prompts), max_new_tokens=max_new_tokens,
                             temperature=float(temperature), n=n, stop=stop, seed=seed)
        # Cut again client-side: idempotent, and makes both backends agree exactly.
        return [[cut_at_stop(t, stop) for t in row] for row in out]

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed):
        raise NotImplementedError


class HFBackend(LLM):
    """A local transformers causal LM. Sampling with a seed is reproducible for the same prompts,
    batch_size, device and library versions (batch composition changes the random stream)."""

    def __init__(self, model_dir_or_hub_id: str, device: str = "cpu", dtype: Any = None,
                 batch_size: int = 16):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype)
        # Never run repository code; load safetensors only (no pickle).
        tok = AutoTokenizer.from_pretrained(model_dir_or_hub_id, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            model_dir_or_hub_id, dtype=dtype, trust_remote_code=False, use_safetensors=True)
        self._setup(model.to(device), tok, batch_size)

    @classmethod
    def from_model(cls, model, tokenizer, *, batch_size: int = 16) -> "HFBackend":
        """Wrap an already-loaded model and tokenizer (used where they are at hand)."""
        self = cls.__new__(cls)
        self._setup(model, tokenizer, batch_size)
        return self

    def _setup(self, model, tokenizer, batch_size: int) -> None:
        self.model, self.tokenizer, self.batch_size = model.eval(), tokenizer, int(batch_size)
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids = set() if eos is None else set(eos if isinstance(eos, list) else [eos])
        # We pad by hand (left) so the caller's tokenizer is never mutated; the pad id only
        # fills masked positions, so falling back to eos (or 0) is harmless.
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos_ids, default=0)

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed):
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
                                             temperature, n, stop)
                for k, i in enumerate(chunk):
                    out[i] = texts[k * n:(k + 1) * n]
        return out

    def _generate_batch(self, batch_ids, max_new_tokens, temperature, n, stop):
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
            kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
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


class OpenAIBackend(LLM):
    """An OpenAI-compatible completions server. The API key comes only from the environment
    variable named by `api_key_env`, read at request time, never stored or logged."""

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 60, max_retries: int = 3, *, batch_size: int = 32,
                 backoff: float = 1.0):
        self.url = base_url.rstrip("/") + "/completions"
        self.model, self.api_key_env = model, api_key_env
        self.timeout, self.max_retries = timeout, max_retries
        self.batch_size, self.backoff = batch_size, backoff

    def __repr__(self) -> str:
        return f"OpenAIBackend(url={self.url!r}, model={self.model!r})"

    def _generate(self, prompts, *, max_new_tokens, temperature, n, stop, seed):
        out: list[list[str]] = []
        for b in range(0, len(prompts), self.batch_size):
            chunk = prompts[b:b + self.batch_size]
            body: dict[str, Any] = dict(model=self.model, prompt=chunk, max_tokens=max_new_tokens,
                                        temperature=temperature, n=n)
            if stop:
                body["stop"] = stop
            if seed is not None:
                body["seed"] = seed
            out.extend(self._group(self._post(body), len(chunk), n))
        return out

    def _group(self, resp: Any, n_prompts: int, n: int) -> list[list[str]]:
        # Choices come flat (len(prompts)*n), possibly out of order; `index` places them.
        choices = resp.get("choices") if isinstance(resp, dict) else None
        by_index = {c.get("index"): c.get("text") for c in choices or []
                    if isinstance(c, dict)}
        want = range(n_prompts * n)
        if len(choices or []) != len(want) or set(by_index) != set(want) or \
                not all(isinstance(t, str) for t in by_index.values()):
            raise LLMError(f"malformed response from {self.url}: expected {len(want)} choices "
                           f"with indices 0..{len(want) - 1}")
        return [[by_index[i * n + j] for j in range(n)] for i in range(n_prompts)]

    def _post(self, body: dict) -> Any:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    raw = r.read()
            except urllib.error.HTTPError as e:
                detail = e.read()[:300].decode(errors="replace")
                last = f"HTTP {e.code}: {detail}"
                if e.code >= 500 or e.code == 429:  # transient: server busy/restarting
                    continue
                raise LLMError(f"POST {self.url} failed: {last}") from None
            except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
                last = f"connection error: {getattr(e, 'reason', e)}"
                continue
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                raise LLMError(f"POST {self.url}: response is not JSON: {raw[:200]!r}") from None
        raise LLMError(f"POST {self.url} failed after {self.max_retries + 1} attempts: {last}")


_SPEC_KEYS = {  # backend -> (required, optional) keys of a make_llm spec
    "hf": ({"model"}, {"device", "dtype", "batch_size"}),
    "openai": ({"base_url", "model"},
               {"api_key_env", "timeout", "max_retries", "batch_size", "backoff"}),
}


def make_llm(spec: dict) -> LLM:
    """Build an LLM from a config dict, e.g. {"backend": "hf", "model": "path/to/dir"} or
    {"backend": "openai", "base_url": "http://host:8000/v1", "model": "name"}."""
    spec = dict(spec)
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
    return OpenAIBackend(spec.pop("base_url"), spec.pop("model"), **spec)
