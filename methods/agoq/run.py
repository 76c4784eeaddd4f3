"""One training run of the AGoQ study (arXiv 2605.00539), data-parallel over `world_size` real
torch.distributed processes on this host: gloo over 127.0.0.1 on CPU, nccl with one GPU per
rank on CUDA (the process-group backend follows the runtime device, `backend_for`).

A small DDP-style loop instead of the shared single-process trainer, so the gradient
all-reduce is ours: every rank takes rows rank::W of the step's global batch (a pure function of
(seed, step)), runs forward under LAAQ's saved-tensor hooks, backward, flattens its gradients
and averages them with `quangrad.Collective` (fp32, or QuanGrad's 8-bit all-reduce whose
result is the int8 gradient buffer, dequantized only for the optimizer). AdamW, decay groups
and the warm-up + cosine schedule are core.train's (`make_optimizer`, `lr_factor`).
"""
from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from methods.agoq.config import RunSection, Variant
from methods.core.results import InputError, dumps as strict_dumps, provenance


@dataclass
class RunConfig(RunSection):
    """The `run` section plus the variant being trained and the run's seed (initialisation,
    batches, stochastic rounding; the workflow merges both in)."""
    variant: Variant
    seed: int


def backend_for(device) -> str:
    """The process-group backend of ranks that compute on `device`: nccl on CUDA, gloo on CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


def build(cfg: RunConfig, tok, dtype=None):
    """A freshly initialised model (seed `cfg.seed`): the tiny Llama of `cfg.model`, or the
    architecture of the hub config `cfg.hub_id` (no weights). Its parameters are created in
    `dtype` (default fp32): a hub config names its release dtype (Llama-3.1: bf16), which
    `from_config` would otherwise train in, without fp32 master weights."""
    import torch

    from methods.core.models import build_model

    if cfg.hub_id is None:
        model = build_model(cfg.model, tok, cfg.seed)
        return model if dtype is None else model.to(dtype)
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(cfg.seed)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg.hub_id), dtype=dtype or torch.float32)


def _worker(rank: int, world: int, rdzv_dir: str, cfg: RunConfig, data_dir: str, shards_dir: str, out_dir: str,
            threads: int):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from methods.core import distributed, runtime
    from methods.core.models import save_model
    from methods.core.train import evaluate_loss, lr_factor, make_optimizer

    from .data import load
    from .laaq import BitPolicy, SavedActivationQuantizer
    from .quangrad import FP32_SLACK, Collective, rel_l2

    torch.set_num_threads(threads)
    rt = runtime.current()  # the job's runtime (inherited, or from $ICML26_RUNTIME when spawned)
    dev = rt.device
    if rt.is_cuda:  # one GPU per rank (train_variant checks that there are enough)
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
        rt = runtime.bind(dev)
    # every rank runs on this host: rendezvous through a file (torch's TCPStore would listen on every
    # interface, whatever MASTER_ADDR says) and gloo on the loopback interface (methods/core/distributed.py)
    distributed.init_local(backend_for(dev), rank, world, rdzv_dir)
    tok, stream, val_stream = load(data_dir, shards_dir, cfg.seq_len)
    # created on the rank's device in the training dtype (fp32 master weights): no host copy of
    # the whole model per rank; then rank 0's weights on every rank, as DDP starts
    with dev:
        model = build(cfg, tok, rt.weight_dtype(training=True))
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            dist.broadcast(t, 0)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(model, cfg.train)
    v = cfg.variant
    laaq = SavedActivationQuantizer(model, BitPolicy(*v.policy()), cfg.n_stages,
                                    cfg.group_size, cfg.stochastic, seed=cfg.seed * 1000 + rank)
    coll = Collective(v.allreduce, cfg.grad_block)
    val = [{k: t.to(dev) for k, t in b.items()}
           for b in val_stream.sequential_batches(cfg.train.batch_size, cfg.eval_batches)]
    initial = evaluate_loss(model, val) if rank == 0 else None
    model.train()
    n = sum(p.numel() for p in params)
    rows, errs, bound_ratio, act, grad_bytes = [], [], 0.0, None, None
    t_comm = 0.0
    t0 = time.perf_counter()
    for step in range(cfg.train.steps):
        batch = stream.batch(step, cfg.train.batch_size, cfg.seed)
        ids, labels = batch["input_ids"][rank::world].to(dev), batch["labels"][rank::world].to(dev)
        lr = cfg.train.lr * lr_factor(step, cfg.train)
        for g in opt.param_groups:
            g["lr"] = lr
        with laaq, rt.autocast():  # the runtime's compute dtype (bf16 on GPUs; a no-op in fp32)
            logits = model(input_ids=ids).logits
        if act is None:
            act = laaq.summary()  # shapes are fixed, so every step holds the same bytes
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        probe = cfg.grad_error_every and (step + 1) % cfg.grad_error_every == 0
        tc = time.perf_counter()
        res = coll.mean(flat, with_bound=bool(probe)) if v.allreduce == "quangrad" else coll.mean(flat)
        t_comm += time.perf_counter() - tc
        if v.allreduce == "quangrad":
            grad_bytes = res.nbytes  # the 8-bit gradient buffer that replaces fp32 main grads
            mean = res.to_tensor()
        else:
            mean = res
            grad_bytes = mean.numel() * mean.element_size()
        if probe:  # exact fp32 mean by a separate (uncounted) all-reduce
            exact = flat.clone()
            dist.all_reduce(exact)
            exact /= world
            errs.append(rel_l2(mean, exact))
            if coll.last_bound is not None:
                slack = FP32_SLACK * exact.abs() + 1e-12  # fp32 rounding on top of the quantization bound
                bound_ratio = max(bound_ratio, float(((mean - exact).abs() / (coll.last_bound + slack)).max()))
        off = 0
        for p in params:
            p.grad.copy_(mean[off: off + p.numel()].view_as(p))
            off += p.numel()
        gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.train.grad_clip) if cfg.train.grad_clip > 0 else None
        opt.step()
        gl = loss.detach().clone()
        dist.all_reduce(gl)
        row = {"step": step + 1, "loss": float(gl) / world, "lr": lr}
        if gnorm is not None:
            row["grad_norm"] = float(gnorm)
        done = step + 1
        if rank == 0 and ((cfg.train.eval_every and done % cfg.train.eval_every == 0) or done == cfg.train.steps):
            row["val_loss"] = evaluate_loss(model, val)
            model.train()
        rows.append(row)
    wall = time.perf_counter() - t0
    # replicas must stay identical: the averaged gradient is the same on every rank
    with torch.no_grad():
        check = torch.tensor([float(sum(p.double().sum() for p in params))], dtype=torch.float64, device=dev)
    all_checks = [torch.zeros_like(check) for _ in range(world)]
    dist.all_gather(all_checks, check)
    bytes_total = torch.tensor([coll.bytes_sent], dtype=torch.float64, device=dev)
    dist.all_reduce(bytes_total)
    laaq.remove()
    if rank == 0:
        losses = [r["loss"] for r in rows]
        final = rows[-1]["val_loss"]
        summary = {
            "variant": v.name, "allreduce": v.allreduce, "world_size": world, "steps": cfg.train.steps,
            "n_params": n, "initial_val_loss": initial, "val_loss": final,
            "final_train_loss": sum(losses[-cfg.loss_window:]) / cfg.loss_window,
            "diverged": not math.isfinite(final),
            "activations": act,
            "grad_buffer_bytes": grad_bytes, "grad_fp32_bytes": 4 * n,
            "grad_buffer_bytes_per_param": grad_bytes / n,
            "comm_bytes_per_step_per_rank": float(bytes_total) / world / cfg.train.steps,
            "comm_bytes_fp32_equiv_per_step_per_rank": 2 * (world - 1) / world * 4 * n,
            "allreduce_rel_err_mean": sum(errs) / len(errs) if errs else None,
            "allreduce_rel_err_max": max(errs) if errs else None,
            "allreduce_max_err_over_bound": bound_ratio if v.allreduce == "quangrad" else None,
            "replicas_in_sync": bool(all(torch.equal(c, all_checks[0]) for c in all_checks)),
            "step_ms": round(1000 * wall / cfg.train.steps, 2),
            "comm_ms_per_step": round(1000 * t_comm / cfg.train.steps, 2),
            "config": json.loads(json.dumps(asdict(cfg))),
            "provenance": provenance(asdict(cfg), cfg.seed, wall),
        }
        save_model(model, tok, out_dir, extra_files={
            "train_log.jsonl": "".join(strict_dumps(r, sort_keys=True) + "\n" for r in rows),
            "train_summary.json": strict_dumps(summary, indent=2, sort_keys=True) + "\n"})
    dist.barrier()
    dist.destroy_process_group()


def train_variant(cfg: RunConfig, data_dir: str | Path, shards_dir: str | Path, out_dir: str | Path,
                  threads: int) -> dict:
    """Start `world_size` processes on localhost (torch.multiprocessing), each with
    max(1, threads // world_size) torch threads; rank 0 writes `out_dir`. On CPU the processes
    are forked after the heavy imports, so transformers is imported once per job, not per rank
    (the parent runs no torch thread pool yet: one thread, nothing computed). On CUDA they are
    spawned: the parent initialised CUDA when it activated the runtime, and CUDA cannot be used
    in a process forked after that; rank r takes GPU r."""
    import torch
    import torch.multiprocessing as mp
    import transformers.models.llama.modeling_llama  # noqa: F401  (inherited by the forked ranks)

    from methods.core import models, shards, tokenizer, train  # noqa: F401
    from methods.core.runtime import current

    from . import data, laaq, quangrad  # noqa: F401

    data.check_inputs(data_dir, shards_dir)  # one line here, not a traceback from every rank
    cuda = current().is_cuda
    if cuda and torch.cuda.device_count() < cfg.world_size:
        raise InputError(f"config key 'world_size': {cfg.world_size} ranks need one GPU each, but "
                         f"{torch.cuda.device_count()} are visible")
    per = max(1, threads // cfg.world_size)
    try:
        with tempfile.TemporaryDirectory(prefix="agoq-rdzv-") as rdzv:
            mp.start_processes(_worker, args=(cfg.world_size, rdzv, cfg, str(data_dir), str(shards_dir),
                                              str(out_dir), per),
                               nprocs=cfg.world_size, join=True, start_method="spawn" if cuda else "fork")
    except mp.ProcessRaisedException as e:
        last = str(e).strip().splitlines()[-1]
        if "InputError" in last:
            raise InputError(last.split("InputError:", 1)[-1].strip()) from None
        raise
    s = json.loads((Path(out_dir) / "train_summary.json").read_text())
    print(f"{cfg.variant.name}: val {s['val_loss']:.4f} act ratio {s['activations']['ratio_vs_bf16']:.3f} "
          f"comm {s['comm_bytes_per_step_per_rank']:.0f} B/step {s['step_ms']} ms/step", file=sys.stderr)
    return s
