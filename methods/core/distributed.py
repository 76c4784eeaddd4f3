"""Multi-GPU / multi-node training through `torch.distributed`, launched by `torchrun`.

A step launched by `torchrun` (or `srun torchrun` on several nodes; see `launcher` in
workflow/rules/common.smk) finds RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in
its environment; `cli.main` then calls `init()`, which joins the process group (nccl on GPUs,
gloo on CPU), binds the worker to GPU LOCAL_RANK and makes that the active runtime's device.
Without WORLD_SIZE (a plain `python -m` launch), or with WORLD_SIZE=1, there is no process
group at all and every helper below is the single-process identity, so a one-GPU or CPU run is
exactly the code path it was before.

`train.train` uses `wrap` with the runtime spec's `distributed` strategy:
- `ddp`: `DistributedDataParallel`; every rank holds the whole model and DDP averages the
  gradients (bucketed all-reduce overlapped with backward).
- `fsdp`: FSDP2 (`torch.distributed.fsdp.fully_shard`) on every decoder layer, then on the root
  (embeddings, final norm, head): parameters, gradients and optimizer state are sharded over
  the ranks and a layer's full weights exist only while it runs, so a model that does not fit
  one GPU trains. Every rank must start from the same weights (same seed or same checkpoint):
  each keeps its own shard of them.

Rendezvous: torchrun's c10d store is created by torchrun (`--standalone`: on this host;
multi-node: on the first node of the SLURM job). torch's TCPStore listens on every interface of
the host it runs on (`*:PORT`, whatever MASTER_ADDR says, torch 2.x), so a group whose ranks all
run on one host does not use one: `init_local` (and `init` where ICML26_RDZV_DIR names a
rendezvous directory) meets through a FileStore in a fresh private directory, which opens no
port, and pins gloo's own sockets to the loopback interface (GLOO_SOCKET_IFNAME, unless set).
`python -m methods.core.distributed --nproc-per-node G -m methods.<slug> ...` starts G such
ranks of one step on this host, with no store port at all (torchrun --standalone's agent keeps
two TCPStores listening on every interface while the job runs). methods/agoq/run.py starts its
ranks with `init_local`; tests/core/test_local_rendezvous.py checks that no rank listens on a
wildcard address. nccl's bootstrap socket is nccl's to place (NCCL_SOCKET_IFNAME).
"""
from __future__ import annotations

import os
import sys

from .results import InputError

STRATEGIES = ("ddp", "fsdp")
RDZV_ENV = "ICML26_RDZV_DIR"  # set by the local launcher (`main`): the ranks' rendezvous directory
LOOPBACK_IFNAMES = ("lo", "lo0")  # Linux, BSD/macOS


def loopback_interface() -> str | None:
    """The name of this host's loopback interface, or None where it has none of the usual names."""
    import socket

    names = {name for _, name in socket.if_nameindex()}
    return next((n for n in LOOPBACK_IFNAMES if n in names), None)


def local_init_method(rdzv_dir) -> str:
    """The `init_method` of ranks that all run on this host: a FileStore in `rdzv_dir` (a fresh
    directory only this job writes), instead of a TCPStore listening on every interface."""
    from pathlib import Path

    return (Path(rdzv_dir).resolve() / "store").as_uri()


def init_local(backend: str, rank: int, world: int, rdzv_dir, **kw) -> None:
    """Join a process group of `world` ranks of this host: rendezvous through a file in
    `rdzv_dir`, gloo's sockets on the loopback interface (unless GLOO_SOCKET_IFNAME says where)."""
    import torch.distributed as dist

    if backend == "gloo":
        lo = loopback_interface()
        if lo is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", lo)
    dist.init_process_group(backend, init_method=local_init_method(rdzv_dir), rank=rank, world_size=world, **kw)


def launched() -> bool:
    """True in a worker of a multi-process launch (torchrun sets WORLD_SIZE > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init(init_method: str | None = None) -> bool:
    """Join the process group described by torchrun's environment; bind this worker's GPU.

    Returns False (and does nothing) for a single-process launch. `init_method` overrides the
    rendezvous (default `env://`: MASTER_ADDR/MASTER_PORT); a `file://` URL on a shared
    filesystem needs no open port."""
    import torch
    import torch.distributed as dist

    from . import runtime

    if not launched():
        return False
    if dist.is_initialized():
        return True
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except (KeyError, ValueError) as e:
        raise InputError(f"WORLD_SIZE is set but the torchrun environment is incomplete ({e}); "
                         "launch with torchrun") from None
    rt = runtime.current()
    kw = {}
    if rt.is_cuda:
        if rt.spec.device.startswith("cuda:"):
            # each worker takes GPU LOCAL_RANK: a fixed index would put every rank on one GPU
            raise InputError(f"runtime.device {rt.spec.device!r} pins one GPU, but this is rank {rank} "
                             f"of {world}; use device auto or cuda (CUDA_VISIBLE_DEVICES selects GPUs)")
        if local >= torch.cuda.device_count():
            raise InputError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} GPUs are visible "
                             "(--nproc-per-node must not exceed the GPUs of the node)")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        runtime.bind(device)
        kw["device_id"] = device  # eager NCCL init, bound to this GPU
    backend = "nccl" if rt.is_cuda else "gloo"
    if init_method is None and os.environ.get(RDZV_ENV):  # ranks of the local launcher (`main`)
        init_local(backend, rank, world, os.environ[RDZV_ENV], **kw)
    else:
        dist.init_process_group(backend, init_method=init_method or "env://", rank=rank, world_size=world, **kw)
    if rank == 0:
        print(f"distributed: {world} ranks, backend {backend}, strategy {strategy()}", file=sys.stderr)
    return True


def is_initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if is_initialized() else 1


def is_main() -> bool:
    """Rank 0 (or the single process): the one that writes logs, metrics, checkpoints, models."""
    return rank() == 0


def barrier() -> None:
    import torch.distributed as dist

    if is_initialized():
        dist.barrier()


def shutdown() -> None:
    """Leave the process group (a clean exit: NCCL warns about, and may hang on, a group that
    is never destroyed)."""
    import torch.distributed as dist

    if is_initialized():
        dist.destroy_process_group()


def strategy() -> str:
    """The strategy in force: the runtime spec's `distributed` with a process group, else none."""
    from .runtime import current

    return current().spec.distributed if is_initialized() else "none"


def all_reduce_mean(x):
    """Mean of a scalar over the ranks, as a float (logging only, never gradients)."""
    import torch
    import torch.distributed as dist

    from .runtime import current

    if not is_initialized():
        return float(x)
    t = torch.as_tensor(x).detach().to(current().device, torch.float64, copy=True).reshape(())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t) / world_size()


def agree(value):
    """Rank 0's value of a small picklable object on every rank (e.g. "does the checkpoint
    exist": ranks that disagree would run different collectives and hang)."""
    import torch.distributed as dist

    if not is_initialized():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def local_rows(batch: dict) -> dict:
    """This rank's contiguous chunk of the rows of a global batch: every tensor whose first
    dimension is the batch's row count is cut, anything else is passed whole. Chunk sizes differ
    by at most one row (`tensor_split`), so any batch size ≥ the number of ranks works."""
    import torch

    if not is_initialized():
        return batch
    ref = batch.get("input_ids", batch.get("labels"))
    if not isinstance(ref, torch.Tensor):
        raise InputError("a distributed batch needs an input_ids or labels tensor to split by row")
    n, w = ref.shape[0], world_size()
    if n < w:
        raise InputError(f"batch of {n} rows cannot be split over {w} ranks (batch_size must be ≥ ranks)")
    idx = torch.tensor_split(torch.arange(n), w)[rank()]
    lo, hi = int(idx[0]), int(idx[-1]) + 1
    return {k: v[lo:hi] if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == n else v
            for k, v in batch.items()}


# ------------------------------------------------------------------------ wrapping ----
def _ddp_class():
    from torch.nn.parallel import DistributedDataParallel

    class DDP(DistributedDataParallel):
        """DDP whose attribute reads fall through to the wrapped model, so a `loss_fn` that
        reads `model.config` works on the wrapper. The forward must still be the wrapper's
        call: DDP's gradient hooks are armed there."""

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                if name == "module":  # not set yet (inside DDP's __init__): no recursion
                    raise
                return getattr(super().__getattr__("module"), name)

    return DDP


def decoder_layers(model) -> list:
    """The modules FSDP shards one by one: the classes HF lists in `_no_split_modules` (its
    decoder layers), else the children of `model.model.layers`."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        inner = getattr(getattr(model, "model", None), "layers", None)
        layers = list(inner) if inner is not None else []
    return layers


def wrap(model, strategy_name: str):
    """The module to call for training: `DistributedDataParallel(model)` (ddp), `model`
    itself sharded in place by FSDP2 (fsdp), or `model` (none / no process group)."""
    if strategy_name not in (*STRATEGIES, "none"):
        raise InputError(f"distributed strategy {strategy_name!r} is not ddp, fsdp or none")
    if strategy_name == "none" or not is_initialized():
        return model
    from .runtime import current

    rt = current()
    if strategy_name == "ddp":
        return _ddp_class()(model, device_ids=[rt.device.index] if rt.is_cuda else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(rt.device.type, (world_size(),))
    layers = decoder_layers(model)
    if not layers:
        print("distributed: no decoder layers found; FSDP shards the model as one unit", file=sys.stderr)
    # per layer first, then the root: a layer's all-gather overlaps the previous layer's compute
    # and only one layer is unsharded at a time; the root takes what is left (embeddings, head)
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def unwrap(model):
    """The user's model under DDP / torch.compile wrappers (FSDP2 shards in place: itself)."""
    while True:
        inner = getattr(model, "_orig_mod", None)
        if inner is None and _is_ddp(model):
            inner = model.module
        if inner is None:
            return model
        model = inner


def _is_ddp(model) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(model, DistributedDataParallel)


def is_fsdp(model) -> bool:
    import torch.distributed as dist

    if not dist.is_available():  # a torch build without distributed support
        return False
    from torch.distributed.fsdp import FSDPModule

    return isinstance(unwrap(model), FSDPModule)


def reshard(model) -> None:
    """Put an FSDP model's parameters back into their sharded form. FSDP2 keeps the root's
    parameters unsharded after a forward (they would be gathered again for backward); after an
    evaluation forward they would stay so, and `parameters()` would not be the sharded
    DTensors the optimizer and the state-dict helpers know."""
    if not is_fsdp(model):
        return
    from torch.distributed.fsdp import FSDPModule

    for m in unwrap(model).modules():
        if isinstance(m, FSDPModule):
            m.reshard()


def _full_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # full (unsharded) tensors, gathered to rank 0 on the CPU: other ranks get empty dicts
    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_state_dict(model) -> dict:
    """The model's full weights, keyed like the plain model's `state_dict()`. Under FSDP this
    gathers the shards — a collective every rank must call — and only rank 0 gets the tensors
    (the others get {}); otherwise it is the unwrapped model's own state dict."""
    if not is_fsdp(model):
        return unwrap(model).state_dict()
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    reshard(model)
    state = get_model_state_dict(unwrap(model), options=_full_options())
    # tied parameters (embedding = head) come back as two separate copies; make them one
    # tensor again, as in the model's own state dict, so that save_pretrained sees the tie and
    # writes the weight once
    first = {}
    for name, p in unwrap(model).named_parameters(remove_duplicate=False):
        if id(p) in first and name in state and first[id(p)] in state:
            state[name] = state[first[id(p)]]
        first.setdefault(id(p), name)
    return state


def _opt_names(model, opt) -> list[str]:
    """Parameter names in the optimizer's order: index i of `opt.state_dict()` is name i."""
    names = {id(p): n for n, p in unwrap(model).named_parameters()}
    return [names[id(p)] for g in opt.param_groups for p in g["params"]]


def train_state(model, opt) -> tuple[dict, dict]:
    """(model, optimizer) state for a checkpoint in the single-process layout (full tensors;
    optimizer state keyed by parameter index), so a checkpoint resumes under any strategy and
    number of ranks. Under FSDP a collective; rank 0 gets the tensors."""
    if not is_fsdp(model):
        return unwrap(model).state_dict(), opt.state_dict()
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    msd = full_state_dict(model)
    osd = get_optimizer_state_dict(unwrap(model), opt, options=_full_options())
    if not is_main():
        return {}, {}
    index = {n: i for i, n in enumerate(_opt_names(model, opt))}
    return msd, {"state": {index[n]: s for n, s in osd["state"].items()},
                 "param_groups": [{**g, "params": [index[n] for n in g["params"]]}
                                  for g in osd["param_groups"]]}


def load_train_state(model, opt, model_state: dict, opt_state: dict) -> None:
    """Inverse of `train_state`, on every rank (each keeps its shard under FSDP)."""
    if not is_fsdp(model):
        unwrap(model).load_state_dict(model_state)
        opt.load_state_dict(opt_state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    names = _opt_names(model, opt)
    by_name = {"state": {names[i]: s for i, s in opt_state["state"].items()},
               "param_groups": [{**g, "params": [names[i] for i in g["params"]]}
                                for g in opt_state["param_groups"]]}
    opts = StateDictOptions(full_state_dict=True)
    set_model_state_dict(unwrap(model), model_state, options=opts)
    set_optimizer_state_dict(unwrap(model), opt, by_name, options=opts)


def full(t):
    """The whole tensor behind a parameter or gradient that may be an FSDP shard (DTensor): a
    collective under FSDP, every rank must call it. Plain tensors are returned as they are."""
    gather = getattr(t, "full_tensor", None)
    return gather() if gather is not None else t


def scalar(x) -> float:
    """A float from a tensor that may be a DTensor (FSDP's grad norm): its full value."""
    full = getattr(x, "full_tensor", None)
    return float(full() if full is not None else x)


def weights_to_save(model) -> dict | None:
    """The `state_dict` argument of `models.save_model` after training: None (the model's own
    weights) unless FSDP sharded it, then its full weights gathered to rank 0. A collective
    under FSDP: call it on every rank, then save on rank 0 only (`is_main`)."""
    return full_state_dict(model) if is_fsdp(model) else None


def launch_local(nprocs: int, argv: list[str]) -> int:
    """Run `python <argv>` as `nprocs` ranks of one process group on this host (what
    `torchrun --standalone --nproc-per-node nprocs` does, without its TCP stores): each rank gets
    RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and the rendezvous directory (RDZV_ENV), a
    fresh private temporary directory removed afterwards. The first rank that fails stops the
    others; returns its exit status (0 when all succeed)."""
    import shutil
    import signal
    import subprocess
    import tempfile
    import time

    if nprocs < 1:
        raise InputError(f"--nproc-per-node must be at least 1, got {nprocs}")
    rdzv = tempfile.mkdtemp(prefix="icml26-rdzv-")
    procs = []
    try:
        for r in range(nprocs):
            env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(nprocs),
                   "LOCAL_WORLD_SIZE": str(nprocs), RDZV_ENV: rdzv}
            procs.append(subprocess.Popen([sys.executable, *argv], env=env))
        signal.signal(signal.SIGTERM, lambda *_: [p.terminate() for p in procs])
        status = 0
        while any(p.poll() is None for p in procs):
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                status = failed[0]
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
            time.sleep(0.1)
        return status or next((p.returncode for p in procs if p.returncode), 0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(rdzv, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """`python -m methods.core.distributed --nproc-per-node G -m methods.<slug> ...`."""
    import argparse

    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="python -m methods.core.distributed",
                                 usage="%(prog)s --nproc-per-node G ARGS... (what follows `python` for every rank)",
                                 description="Run a step as G ranks of one process group on this host "
                                             "(rendezvous through a file: no port is opened).")
    ap.add_argument("--nproc-per-node", type=int, required=True)
    head = argv[:1] if argv[:1] and "=" in argv[0] else argv[:2]  # the rest is the ranks' own
    a = ap.parse_args(head)
    try:
        return launch_local(a.nproc_per_node, argv[len(head):])
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
