"""One training loop for every paper that trains.

AdamW or SGD over decay / no-decay parameter groups, linear warm-up + cosine decay, gradient
clipping, periodic evaluation, JSONL metrics, and checkpoint/resume that reproduces an
uninterrupted run bit for bit: batches are functions of (seed, step) (see `data`), and the
checkpoint holds the model, the optimizer state, the step and the metrics written so far.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Callable, Literal

from .config import Check, NonNeg, NonNegInt, PosInt, Positive, Prob, key_error
from .results import InputError, atomic_path, config_hash, dumps as strict_dumps

_Beta = Annotated[float, Check(minimum=0, exclusive_maximum=1)]  # an Adam β ∈ [0, 1)


@dataclass
class TrainConfig:
    """A scale file's `train` sub-section (weight_decay and seed are usually set per run); the
    Checks and `check` apply when it is read (`from_dict`, so at workflow start-up), `check`
    again when `train` starts, the rules of `__post_init__` on every construction."""
    steps: PosInt
    batch_size: PosInt
    lr: Positive
    optimizer: Literal["adamw", "sgd"] = "adamw"
    betas: tuple[_Beta, _Beta] = (0.9, 0.95)
    eps: Positive = 1e-8
    momentum: NonNeg = 0.0            # sgd only
    warmup_steps: NonNegInt = 0
    schedule: Literal["cosine", "constant"] = "cosine"
    min_lr_ratio: Prob = 0.0          # cosine floor as a fraction of the peak lr
    grad_clip: NonNeg = 0.0           # max global grad norm; 0 = off
    decay_min_ndim: NonNegInt = 2     # decay only tensors with ndim ≥ this (Llama recipe); 0 = all
    weight_decay: NonNeg = 0.0        # decoupled for AdamW (θ ← θ − γ_t λ θ); L2-in-gradient for SGD
    eval_every: NonNegInt = 0         # 0 = evaluate at the end only
    ckpt_every: NonNegInt = 0         # 0 = no intermediate checkpoints
    log_every: PosInt = 10
    seed: int = 0

    def __post_init__(self):
        if self.optimizer not in ("adamw", "sgd"):
            raise InputError(f"config key 'optimizer': unknown optimizer {self.optimizer!r} (adamw or sgd)")
        if self.schedule not in ("cosine", "constant"):
            raise InputError(f"config key 'schedule': unknown schedule {self.schedule!r} (cosine or constant)")
        for key in ("steps", "batch_size"):
            if getattr(self, key) <= 0:
                raise InputError(f"config key '{key}' must be positive, got {getattr(self, key)}")

    def check(self) -> None:
        """Rules across fields (see `methods.core.config.run_check`). `log_every` may exceed
        `steps` (the last step is always logged: smoke runs shorten steps, not log_every)."""
        if not 0 <= self.warmup_steps <= self.steps:
            raise key_error("warmup_steps", f"{self.warmup_steps} warm-up steps in a run of steps={self.steps} "
                                            "(must be in [0, steps])")
        for key in ("eval_every", "ckpt_every"):
            if getattr(self, key) > self.steps:
                raise key_error(key, f"{getattr(self, key)} is more than steps={self.steps} "
                                     "(0 = at the end only / never)")


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Multiplier of the peak lr used for update `step` (0-based): linear warm-up from 0, then
    cosine from 1 towards `min_lr_ratio`, reached at step == steps (one past the last update,
    transformers' convention), or constant."""
    if step < cfg.warmup_steps:
        return step / max(1, cfg.warmup_steps)
    if cfg.schedule == "constant":
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """Decay group: tensors with ndim ≥ decay_min_ndim (matrices, embeddings); no-decay group:
    norms' gains and biases. Tied weights appear once (named_parameters deduplicates)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= cfg.decay_min_ndim else no_decay).append(p)
    return [{"params": decay, "weight_decay": cfg.weight_decay, "name": "decay"},
            {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"}]


def make_optimizer(model, cfg: TrainConfig, impl: Literal["auto", "single", "foreach", "fused"] = "auto"):
    """AdamW (or SGD) over `param_groups`. AdamW's kernel: `impl="auto"` is the fused kernel on
    CUDA and torch's single-tensor loop on the CPU (torch's own CPU default). Measured on the
    CPU (benchmarks/README.md): foreach is bitwise equal to the single-tensor loop but not
    reliably faster (faster on a quiet core at 151k parameters, slower under load and at 3M);
    the fused CPU kernel is 3-13× faster per step but rounds differently (|Δθ| ~ 6e-7 after
    50 steps), so it is opt-in (`impl="fused"`) to keep existing results bit-reproducible."""
    import torch

    groups = param_groups(model, cfg)
    if cfg.optimizer == "adamw":
        # torch's AdamW is the decoupled rule of Loshchilov & Hutter: θ ← θ(1 − lr·λ) − lr·m̂/(√v̂+ε),
        # with lr the *scheduled* rate, so the shrink per step is γ_t·λ.
        if impl == "auto":
            impl = "fused" if any(p.is_cuda for g in groups for p in g["params"]) else "single"
        kw = {"single": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, **kw)
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)


def lm_loss(model, batch: dict):
    """Mean next-token cross-entropy. `labels[t]` is the target of position t (already shifted);
    -100 marks positions without a target."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
    return F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)


def evaluate_loss(model, batches: list[dict]) -> float:
    """Token-weighted mean loss over fixed batches."""
    import torch

    from .runtime import current

    rt = current()
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad(), rt.autocast(training=was_training):
        for b in batches:
            # counted where the batch was made (the CPU, usually): no device sync per batch
            n = int((b["labels"] != -100).sum())
            if n == 0:  # a batch without targets has no loss (its mean would be NaN)
                continue
            # summed on the device in float64, read once at the end: the same IEEE operations
            # as a Python-float sum of float(loss)·n, so the same value
            total = total + lm_loss(model, rt.to_device(b)).double() * n
            count += n
    model.train(was_training)
    return float(total) / max(1, count)


def target_tokens(batch: dict) -> int:
    """The weight of a batch in `lm_loss`'s mean: its number of target tokens."""
    return int((batch["labels"] != -100).sum())


def _rank_loss(fwd, loss_fn, batch: dict, share: float):
    """This rank's term of the objective, scaled so that the gradient AVERAGE over the W ranks
    (what DDP's all-reduce and FSDP's reduce-scatter compute) is the gradient of the
    single-process loss on the global batch.

    The single-process loss is a mean over all N target tokens of the global batch; rank r
    holds n_r of them, so loss = Σ_r (n_r/N)·loss_r with loss_r its own mean. Back-propagating
    W·(n_r/N)·loss_r on each rank makes the average Σ_r (n_r/N)·∇loss_r, exactly the global
    gradient up to float summation order. (A plain per-rank mean would weight the tokens of
    rows with much -100 padding more than the single process does.) A term that is not a mean
    over tokens — an MoE's load-balancing loss over the rank's own tokens — is weighted the
    same way, which is the usual data-parallel approximation of it."""
    from . import distributed

    if share == 0:
        # no targets in this rank's rows: a zero loss through the same forward, so this rank's
        # DDP/FSDP hooks fire and its collectives match the others' (a mean over no targets is
        # NaN, and NaN·0 is NaN)
        out = fwd(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"))
        return out.logits.float().sum() * 0.0
    return loss_fn(fwd, batch) * (share * distributed.world_size())


def run_hash(cfg: TrainConfig, model=None, identity=None) -> str:
    """What decides a run, hashed: the TrainConfig, the model's parameter names and shapes, and
    the caller's `identity` (its model/step config, a data fingerprint: anything JSON-able). A
    checkpoint carries it, and only a run with the same hash resumes from it."""
    params = [] if model is None else [[n, list(p.shape)] for n, p in model.named_parameters()]
    return config_hash({"train": asdict(cfg), "params": params, "identity": identity})


def _save_checkpoint(path: Path, model, opt, step: int, rows: list[dict], run: str | None = None) -> None:
    import torch

    from . import distributed

    # the single-process layout whatever the strategy (FSDP gathers its shards: a collective
    # every rank joins), written by rank 0 only
    model_state, opt_state = distributed.train_state(model, opt)
    if not distributed.is_main():
        return
    with atomic_path(path) as tmp:
        torch.save({"model": model_state, "optimizer": opt_state, "step": step, "run_hash": run,
                    "rows": [strict_dumps(r, sort_keys=True) for r in rows]}, tmp)


def _load_checkpoint(path: Path, model, opt, run: str | None = None) -> tuple[int, list[dict]] | None:
    """(step, rows) of the checkpoint at `path`, its state loaded into model and optimizer; None
    (and one line on stderr) where it was written by a run of another hash than `run`."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated or foreign file: say which file, start over is the user's call
        raise InputError(f"corrupt checkpoint {path}: {str(e).splitlines()[0]}") from None
    from . import distributed

    # rank 0's file decides for every rank (they must agree on resuming)
    theirs = distributed.agree(state.get("run_hash") if isinstance(state, dict) else None)
    if theirs != run:
        if distributed.is_main():
            print(f"checkpoint {path} was written by another config (hash {theirs}≠{run}): "
                  "starting afresh", file=sys.stderr)
        return None
    distributed.load_train_state(model, opt, state["model"], state["optimizer"])
    return int(state["step"]), [json.loads(r) for r in state["rows"]]


def train(model, batch_fn: Callable[[int], dict], cfg: TrainConfig, *,
          eval_fn: Callable[[], dict] | None = None, ckpt_path: str | Path | None = None,
          log_path: str | Path | None = None, desc: str = "train",
          loss_fn: Callable | None = None,
          grad_probe: Callable[[int], dict | None] | None = None, identity=None) -> list[dict]:
    """Train `model` in place for cfg.steps updates; return the metric rows.

    `batch_fn(step)` returns the batch for update `step`; `eval_fn()` returns a dict of metrics
    (e.g. {"val_loss": ...}). `loss_fn(model, batch)` is the objective (default `lm_loss`; an
    MoE adds its auxiliary loss there). `grad_probe(done)` runs after backward and before
    clipping, with `done` the 1-based index of the update; a dict it returns becomes a row
    {"step": done, **dict} (e.g. per-layer gradient norms). With `ckpt_path`, an existing
    checkpoint is resumed and a new one written every `ckpt_every` steps; the file is removed
    after the final step. Metric rows hold no wall-clock values, so a resumed run's rows equal
    an uninterrupted run's. A checkpoint resumes only the run that wrote it: it carries
    `run_hash(cfg, model, identity)`, with `identity` whatever else decides the run (the
    caller's model/step config, a data fingerprint; JSON-able), and a checkpoint of another hash
    is ignored (one line on stderr) and training starts from step 0.

    The model runs where the active runtime says (`runtime.current()`): it is moved there in
    the training dtype (fp32 master weights by default), batches follow it, and the loss is
    computed under autocast in the compute dtype (bf16 on GPUs that have it); `batch_fn` may
    return CPU tensors.

    Under torchrun (a process group from `distributed.init`) every rank calls `train` with the
    same arguments; `batch_fn(step)` is the GLOBAL batch and each rank trains on its chunk of
    rows, with its loss weighted so that the gradient DDP/FSDP average equals the
    single-process gradient of the global batch (`_rank_loss`). The strategy is the runtime
    spec's `distributed` (ddp | fsdp). Every rank returns the same rows (losses are averaged
    over ranks for logging); only rank 0 writes the log, the checkpoint and the progress bar.
    `eval_fn` and `grad_probe` run on every rank (under FSDP their forwards are collectives;
    a probe sees DDP's averaged gradients, or FSDP's local gradient shards). A `loss_fn` whose
    objective is not a mean over target tokens (labels ≠ -100) says what it averages over with
    a `loss_weight(batch) -> number` attribute.
    """
    import torch
    from tqdm import tqdm

    from . import distributed
    from .runtime import current

    cfg.check()  # a config built in code, not read by from_dict, gets the same cross-field rules
    rt = current()
    run = run_hash(cfg, model, identity) if ckpt_path else None  # before placing: names and shapes as built
    strategy = distributed.strategy()  # "none" without a process group: the plain loop below
    if strategy == "fsdp":
        # dtype only: fully_shard moves each layer's shard to this rank's device as it shards
        # it, so the whole model never has to sit on one GPU
        model.to(dtype=rt.weight_dtype(training=True))
    else:
        rt.place(model, training=True)
    fwd = rt.maybe_compile(distributed.wrap(model, strategy))
    loss_fn = loss_fn or lm_loss
    opt = make_optimizer(model, cfg)  # after wrapping: FSDP replaces parameters by sharded ones
    ckpt = Path(ckpt_path) if ckpt_path else None
    start, rows = 0, []
    main = distributed.is_main()
    # rank 0 decides: ranks that disagree about resuming would run different collectives
    resumed = None
    if ckpt is not None and distributed.agree(ckpt.exists()):
        resumed = _load_checkpoint(ckpt, model, opt, run)
    if resumed is not None:
        start, rows = resumed
        if main:
            print(f"{desc}: resumed from {ckpt} at step {start}", file=sys.stderr)
    params = [p for g in opt.param_groups for p in g["params"]]
    tokens_per_step = None
    model.train()
    bar = tqdm(range(start, cfg.steps), desc=desc, initial=start, total=cfg.steps, mininterval=5.0,
               file=sys.stderr, disable=os.environ.get("TQDM_DISABLE") == "1" or not main)
    t0 = time.perf_counter()
    for step in bar:
        global_batch = batch_fn(step)
        if tokens_per_step is None:
            tokens_per_step = int((global_batch["labels"] != -100).sum())
        if strategy == "none":
            batch = rt.to_device(global_batch)
        else:
            local = distributed.local_rows(global_batch)
            weight = getattr(loss_fn, "loss_weight", target_tokens)
            share = weight(local) / max(weight(global_batch), 1)
            batch = rt.to_device(local)
        # the schedule is a pure function of the step, so resuming needs no scheduler state
        lr = cfg.lr * lr_factor(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        with rt.autocast():
            loss = loss_fn(fwd, batch) if strategy == "none" else _rank_loss(fwd, loss_fn, batch, share)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        probe = grad_probe(step + 1) if grad_probe is not None else None
        # the pre-clip global norm stays a tensor: reading it (a device sync) only when logged
        gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip) if cfg.grad_clip > 0 else None
        opt.step()
        done = step + 1
        last = done == cfg.steps
        if done % cfg.log_every == 0 or last:
            if gnorm is None:
                gnorm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
            # distributed: the mean over ranks of the scaled losses is the global batch's loss
            loss_value = loss.item() if strategy == "none" else distributed.all_reduce_mean(loss)
            rows.append({"step": done, "loss": loss_value, "lr": lr, "grad_norm": distributed.scalar(gnorm)})
            # refresh=False: the bar redraws on its own clock (mininterval), not on every logged step
            bar.set_postfix(loss=f"{loss_value:.4f}", refresh=False)
        if probe:
            rows.append({"step": done, **probe})
        if eval_fn is not None and ((cfg.eval_every and done % cfg.eval_every == 0) or last):
            rows.append({"step": done, **eval_fn()})
        if ckpt is not None and cfg.ckpt_every and done % cfg.ckpt_every == 0 and not last:
            _save_checkpoint(ckpt, model, opt, done, rows, run)
    bar.close()
    elapsed = time.perf_counter() - t0
    if cfg.steps > start and tokens_per_step and main:  # distributed: the whole job's tokens
        print(f"{desc}: {(cfg.steps - start) * tokens_per_step / elapsed:,.0f} tokens/s "
              f"over {cfg.steps - start} steps", file=sys.stderr)
    if log_path is not None and main:
        with atomic_path(log_path) as tmp:
            tmp.write_text("".join(strict_dumps(r, sort_keys=True) + "\n" for r in rows))
    if ckpt is not None and main and ckpt.exists():
        ckpt.unlink()
    distributed.reshard(model)  # FSDP: leave with sharded parameters (an eval forward unshards the root)
    model.eval()
    return rows


def config_dict(cfg: TrainConfig) -> dict:
    return asdict(cfg)
