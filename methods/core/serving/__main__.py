"""Start one served model, publish its address, keep it up until told to stop.

    python -m methods.core.serving serve --name N --model DIR_OR_HUB_ID --served-name NAME
        --engine vllm|local --gpus G [--args JSON] [--ready-timeout-s S] --address FILE

The server (`vllm serve ...` or `python -m methods.core.llm_server ...`) runs in its own process
group on 127.0.0.1 (its consumers share its node: Snakemake runs a `service()` job with its
consumers as one group). Once `GET /v1/models` answers, the address is written atomically to FILE
(`methods/core/serving/__init__.py` documents it). On SIGTERM/SIGINT/SIGHUP (Snakemake terminates
a service job once its consumers are done), on the parent's death, or when the server exits, the
whole process group is terminated (SIGTERM, then SIGKILL after a grace period) and FILE removed.
The server also gets a parent-death signal, so it cannot outlive this process even if this one is
SIGKILLed (as Snakemake does to a group whose consumer failed). If the server does not come up,
FILE says `status: failed` with the reason (its consumers stop at once), and the exit is non-zero.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from methods.core.results import InputError, write_json

GRACE_S = 20.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_command(engine: str, model: str, served_name: str, port: int, gpus: int, args: list[str],
                   host: str = "127.0.0.1") -> list[str]:
    if engine == "local":
        return [sys.executable, "-m", "methods.core.llm_server", "--model", model, "--name", served_name,
                "--port", str(port), *args]
    if engine == "vllm":
        return ["vllm", "serve", model, "--host", host, "--port", str(port), "--served-model-name", served_name,
                "--tensor-parallel-size", str(gpus), *args]
    raise InputError(f"serving engine must be 'vllm' or 'local', got {engine!r}")


def _die_with_parent() -> None:
    """In the server child: SIGTERM when the serving process dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def _ready(base_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout, OSError):
        return False


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Terminate the server's process group (SIGTERM, then SIGKILL after grace_s) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:  # stragglers of the group (engine workers) even if the leader exited
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=5)


class _Stop(Exception):
    pass


def serve(a) -> int:
    address = Path(a.address)
    write_json(address, {"status": "starting", "name": a.name, "engine": a.engine, "host": socket.gethostname()})
    args = json.loads(a.args) if a.args else []
    port = free_port()
    cmd = server_command(a.engine, a.model, a.served_name, port, a.gpus, [str(x) for x in args])
    base_url = f"http://127.0.0.1:{port}/v1"

    def on_signal(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    parent = os.getppid()
    print(f"serving {a.name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_die_with_parent)
    print(f"serving {a.name}: server pid {proc.pid} (process group {proc.pid}), serving process pid {os.getpid()}",
          file=sys.stderr, flush=True)
    rc = 0
    try:
        deadline = time.monotonic() + a.ready_timeout_s
        while not _ready(base_url):
            if proc.poll() is not None:
                raise InputError(f"server {a.name} ({a.engine}) exited with status {proc.returncode} "
                                 "before answering (see its log)")
            if time.monotonic() >= deadline:
                raise InputError(f"server {a.name} ({a.engine}) did not answer {base_url}/models within "
                                 f"{a.ready_timeout_s:g} s")
            time.sleep(0.25)
        write_json(address, {"status": "ready", "base_url": base_url, "model": a.served_name, "name": a.name,
                             "engine": a.engine, "pid": proc.pid, "host": socket.gethostname(),
                             "gpus": a.gpus, "served_path": a.model})
        print(f"serving {a.name}: ready at {base_url}", file=sys.stderr, flush=True)
        while proc.poll() is None:
            if os.getppid() != parent:  # Snakemake is gone: nobody will stop us
                raise _Stop("parent exited")
            time.sleep(0.5)
        raise InputError(f"server {a.name} exited with status {proc.returncode} while serving")
    except _Stop as e:
        print(f"serving {a.name}: stopping ({e})", file=sys.stderr, flush=True)
    except InputError as e:
        write_json(address, {"status": "failed", "error": str(e), "name": a.name})
        print(f"error: {e}", file=sys.stderr, flush=True)
        rc = 2
        # keep the failure note for consumers that are still waiting; Snakemake removes the
        # service output when the group ends
    finally:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        stop_group(proc)
        if rc == 0 and address.exists():  # a stopped server has no address
            address.unlink()
        print(f"serving {a.name}: server pid {proc.pid} stopped (status {proc.returncode})", file=sys.stderr,
              flush=True)
    return rc


def _serve_step(a) -> int:
    if a.engine == "vllm" and a.runtime and json.loads(a.runtime).get("device") == "cpu":
        raise InputError("engine vllm needs a GPU job, but this job's runtime device is cpu (use engine: local on CPU)")
    return serve(a)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m methods.core.serving", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="start a served model and publish its address")
    s.add_argument("--name", required=True)
    s.add_argument("--model", required=True, help="hub id or model directory")
    s.add_argument("--served-name", required=True, help="the model name requests use")
    s.add_argument("--engine", choices=["vllm", "local"], required=True)
    s.add_argument("--gpus", type=int, default=1)
    s.add_argument("--args", default="[]", help="JSON list of extra engine arguments")
    s.add_argument("--ready-timeout-s", type=float, default=1800.0)
    s.add_argument("--address", required=True)
    s.add_argument("--runtime", default=None, help="the scale's runtime spec (JSON): vLLM needs its device on a GPU")
    s.set_defaults(func=_serve_step)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Not `cli.main`: the serving process stays torch-free (the runtime spec is only checked)."""
    a = build_parser().parse_args(argv)
    try:
        return a.func(a)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
