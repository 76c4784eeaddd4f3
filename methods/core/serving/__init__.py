"""Open models served as part of the DAG (a shared part of core with rules of its own:
`workflow/rules/serving.smk`).

A paper names the models it serves in its own `serving:` sub-section of its scale-file section,
`{<name>: {model, engine, gpus, args, ready_timeout_s}}`:

- `model`: a hub id or a model directory the DAG trained (`dag:<path under the paper's results>`,
  e.g. `dag:models/aligned`);
- `engine`: `vllm` (`vllm serve <model>`, OpenAI-compatible) or `local` (our
  `python -m methods.core.llm_server`, tests and CPU runs);
- `gpus`: the GPUs the server needs (null = sized from the model's weights, methods/core/resources.py);
- `args`: extra command-line arguments of the engine (e.g. `["--max-model-len", "8192"]`); a
  flag that carries a secret (`--api-key`, `--hf-token`) is refused: the engine reads it from
  the environment (VLLM_API_KEY, HF_TOKEN).

A make_llm spec that says `serve: <name>` instead of `base_url` is a client of that server: the
workflow adds the server's address file as an input of the consumer rule (a Snakemake `service()`
output, so the server runs in the consumer's job group, on its node, and is terminated when its
last consumer is done) and hands the step `base_url_file`; `make_llm` reads `base_url` (and the
served model name) from it. Hosted APIs keep `base_url: https://...`.

The address file (JSON, written atomically): `{"status": "starting"}` at once (Snakemake checks
that a consumer's inputs exist when the group starts), then `{"status": "ready", "base_url",
"model", "name", "engine", "pid", "host"}`, or `{"status": "failed", "error"}` when the server did
not come up (so consumers fail at once with that line instead of waiting). Torch-free.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from methods.core.results import InputError

ENGINES = ("vllm", "local")
ENTRY_KEYS = {"model", "engine", "gpus", "args", "ready_timeout_s"}
# engine flags whose value is a secret: on the command line it would be kept in Snakemake's job
# records and logs; each has an environment variable the engine reads instead
SECRET_FLAGS = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
DAG_PREFIX = "dag:"


def check_serving(serving: Any, key: str) -> dict[str, dict]:
    """Validate a paper's `serving:` sub-section; returns it with defaults filled
    (engine vllm, gpus null, args [], ready_timeout_s 1800). One-line InputError naming the key."""
    if serving is None:
        return {}
    if not isinstance(serving, dict):
        raise InputError(f"config key '{key}': expected a mapping of served models, got {type(serving).__name__}")
    out = {}
    for name, e in serving.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
            raise InputError(f"config key '{where}': a served model's name is letters, digits, '_', '-', '.'")
        if not isinstance(e, dict):
            raise InputError(f"config key '{where}': expected a mapping, got {type(e).__name__}")
        unknown = sorted(set(e) - ENTRY_KEYS)
        if unknown:
            raise InputError(f"config key '{where}': unknown key(s) {unknown} (keys: {sorted(ENTRY_KEYS)})")
        if not isinstance(e.get("model"), str) or not e["model"]:
            raise InputError(f"missing config key '{where}.model' (a hub id, a directory or dag:<path>)")
        engine = e.get("engine", "vllm")
        if engine not in ENGINES:
            raise InputError(f"config key '{where}.engine': {engine!r} is not one of {list(ENGINES)}")
        gpus = e.get("gpus")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1):
            raise InputError(f"config key '{where}.gpus': expected null or an integer >= 1, got {gpus!r}")
        args = e.get("args") or []
        if not isinstance(args, list) or not all(isinstance(x, (str, int, float)) for x in args):
            raise InputError(f"config key '{where}.args': expected a list of command-line words")
        for word in map(str, args):
            flag = word.split("=", 1)[0]
            if flag in SECRET_FLAGS:
                raise InputError(f"config key '{where}.args': {flag} would put a secret on the job's command line "
                                 f"(kept in Snakemake's records); set {SECRET_FLAGS[flag]} in the environment instead")
        rt = e.get("ready_timeout_s", 1800)
        if not isinstance(rt, (int, float)) or rt <= 0:
            raise InputError(f"config key '{where}.ready_timeout_s': expected a positive number, got {rt!r}")
        out[name] = {"model": e["model"], "engine": engine, "gpus": gpus, "args": [str(x) for x in args],
                     "ready_timeout_s": rt}
    return out


def check_serve_refs(specs: list[tuple[str, dict]], serving: dict, key: str) -> None:
    """Every `serve: <name>` of the (where, make_llm spec) pairs names an entry of `serving`, and
    no spec has both `serve` and `base_url`."""
    for where, spec in specs:
        if not isinstance(spec, dict) or "serve" not in spec:
            continue
        if spec.get("base_url") is not None or spec.get("base_url_file") is not None:
            raise InputError(f"config key '{where}': give either serve or base_url, not both")
        if spec["serve"] not in serving:
            raise InputError(f"config key '{where}.serve': {spec['serve']!r} is not an entry of '{key}' "
                             f"(entries: {sorted(serving)})")


def served_model_name(entry: dict) -> str:
    """The model name the server answers to (the `model` field of requests): the config's `model`
    (hub id, or the dag:<path> reference), so provenance names what was served."""
    return entry["model"]


def resolve_spec(spec: dict, address_file: str | Path | None) -> dict:
    """A config make_llm spec with `serve: <name>` → the step's spec with `base_url_file`
    (the address file of that server); other specs unchanged."""
    if not isinstance(spec, dict) or "serve" not in spec:
        return spec
    if address_file is None:
        raise InputError(f"spec serves {spec['serve']!r} but no address file was given")
    out = {k: v for k, v in spec.items() if k != "serve"}
    out["base_url_file"] = str(address_file)
    return out


def read_address(path: str | Path, wait_s: float = 3600.0, poll_s: float = 0.2) -> dict:
    """The published address of a served model, waiting up to `wait_s` for the file to appear
    (the server and its consumers start together in one job group). InputError (one line) if it
    does not appear, is malformed, or says the server failed; also, at once, if this process's
    parent (the job's shell) is gone while it waits: Snakemake stopped the job (its group
    failed), and a consumer must not outlive it waiting for a server that will not come."""
    path = Path(path)
    deadline = time.monotonic() + wait_s
    parent = os.getppid()
    while True:
        try:
            addr, err = json.loads(path.read_text()), None
        except FileNotFoundError:
            addr, err = None, "did not appear"
        except (OSError, json.JSONDecodeError) as e:  # being written: try again until the deadline
            addr, err = None, f"is corrupt ({e})"
        if isinstance(addr, dict) and addr.get("status") == "starting":
            addr, err = None, "still says the server is starting"
        if addr is not None:
            break
        if time.monotonic() >= deadline:
            raise InputError(f"served model address {path} {err} after {wait_s:g} s "
                             "(see the log of its serving_serve job)")
        if os.getppid() != parent:
            raise InputError(f"stopped waiting for served model address {path}: the job that "
                             "started this step is gone")
        time.sleep(poll_s)
    if not isinstance(addr, dict):
        raise InputError(f"corrupt served model address {path}: expected a JSON object")
    if addr.get("status") == "failed":
        raise InputError(f"served model of {path} failed to start: {addr.get('error')}")
    missing = [k for k in ("base_url", "model") if not isinstance(addr.get(k), str) or not addr.get(k)]
    if addr.get("status") != "ready" or missing:
        raise InputError(f"corrupt served model address {path}: status {addr.get('status')!r}, "
                         f"missing {missing}")
    return addr
