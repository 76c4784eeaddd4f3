"""K tiny training runs of one architecture as one batched model: seeds (or grid points that differ
only in weight decay) of a sweep, trained in one process, one forward/backward/AdamW per step.

The K models' parameters are stacked along a new leading "member" dimension
(`torch.func.stack_module_state`); the forward is `torch.vmap` over the members of
`torch.func.functional_call(model, member_params, batch)`, each member on its own batch. The K
losses are summed and back-propagated once; the members share no parameter, so the gradient of
the sum with respect to member k's slice is member k's own gradient. Then, per update:

  * clipping is per member: member k's gradients are scaled by min(1, c / (‖g_k‖ + 1e-6)), with
    ‖g_k‖ the global norm of member k's gradients alone, computed the way
    `torch.nn.utils.clip_grad_norm_` does (a per-tensor 2-norm with `torch._foreach_norm`, in the
    trainer's parameter-group order, then the 2-norm of those norms), on each member's slice;
  * weight decay is decoupled and per member: θ_k ← θ_k (1 − γ_t λ_k) on the tensors that decay in
    `train.param_groups` (ndim ≥ decay_min_ndim counted WITHOUT the member dimension) — the same
    float32 multiply `torch.optim.AdamW` does before its update;
  * the Adam update is elementwise, so one `torch.optim.AdamW` (weight_decay 0) over the stacked
    tensors is K independent AdamWs: each element's m, v and update see only that element.

Exactness. Clipping, decay and the Adam update reproduce K separate `train.train` runs bit for
bit given the same gradients (tests/core/test_batched.py checks the optimizer part bitwise).
The forward/backward need not be: vmap turns each member's matmuls into batched ones, which a
BLAS may round differently. Measured on the CPU (MKL, 1 thread) the gradients, and so the
weights and grad norms, of the tiny Llama come out bitwise equal to separate runs, and the test
asserts that; only the logged loss differs in the last bits (the vmapped cross-entropy forms its
mean in another order; rel 1e-6). Speed (benchmarks/README.md): 1.5× K sequential runs at
batch 1–2, none at batch 8–32, where a tiny step is already compute-bound. What does not change between members: the
architecture, the batch shape, steps, lr and schedule, betas, eps, grad_clip (one TrainConfig).
What may change: the init seed, the data (batch_fn(step, k)) and the weight decay λ_k.

How a sweep would use it (no paper's DAG does yet: this would change the last bits of its
numbers). A rule that trains seeds s_1..s_K of one config calls

    models, rows = train_batched(lambda k: build_model(mcfg, tok, seeds[k]),
                                 len(seeds), lambda step, k: stream.batch(step, B, seeds[k]), tcfg)

and then evaluates and saves `models[k]` and `rows[k]` exactly as it would after K calls of
`train(model_k, batch_fn_k, tcfg)`. Not supported here: checkpoint/resume, eval_fn, grad_probe,
loss functions other than `train.lm_loss`'s mean next-token cross-entropy, per-member lr,
distributed training, autocast (fp32 on the CPU is the target: many tiny runs on a few cores).
"""
from __future__ import annotations

from typing import Callable, Sequence

from .results import InputError
from .train import TrainConfig, lr_factor, param_groups


def _member_loss(model, logits_only: Callable):
    """The per-member objective for vmap: mean next-token CE of one member's batch (`lm_loss`)."""
    import torch.nn.functional as F
    from torch.func import functional_call

    def loss(params, buffers, input_ids, labels):
        out = functional_call(model, (params, buffers), args=(), kwargs={"input_ids": input_ids, "use_cache": False})
        logits = logits_only(out)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
    return loss


def member_clip_(grads: list, max_norm: float):
    """Clip each member's gradients by its own global norm; return the K pre-clip norms.
    `grads` are stacked (K, ...) tensors in the trainer's order (decay group, then no-decay)."""
    import torch

    K = grads[0].shape[0]
    # one slice per (member, tensor): the same contiguous data a separate run's .grad holds,
    # so _foreach_norm gives the same per-tensor norms as clip_grad_norm_ does there
    slices = [g[k] for k in range(K) for g in grads]
    per = torch._foreach_norm(slices, 2.0)
    n = len(grads)
    norms = torch.stack([torch.linalg.vector_norm(torch.stack(per[k * n:(k + 1) * n]), 2.0) for k in range(K)])
    if max_norm > 0:
        coef = torch.clamp(max_norm / (norms + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.ndim - 1))))
    return norms


def train_batched(make_model: Callable[[int], object], k_members: int,
                  batch_fn: Callable[[int, int], dict], cfg: TrainConfig, *,
                  weight_decays: Sequence[float] | None = None,
                  logits_only: Callable = lambda out: out.logits) -> tuple[list, list[list[dict]]]:
    """Train K same-shaped models as one vmapped model for cfg.steps AdamW updates.

    `make_model(k)` builds member k (e.g. `build_model(mcfg, tok, seeds[k])`); `batch_fn(step, k)`
    returns member k's batch for update `step` (the same shapes for every k); `weight_decays`
    gives λ_k per member (default: cfg.weight_decay for all). Returns (models, rows): the K
    models with their trained weights written back (in eval mode), and per member the metric
    rows `train.train` would log ({"step", "loss", "lr", "grad_norm"} every log_every and at
    the last step). fp32 on the CPU; see the module docstring for what may differ by member.
    """
    import warnings

    import torch
    from torch.func import stack_module_state

    if cfg.optimizer != "adamw":
        raise InputError(f"train_batched supports optimizer 'adamw' only, got {cfg.optimizer!r}")
    if k_members < 1:
        raise InputError(f"train_batched needs at least one member, got {k_members}")
    lams = [cfg.weight_decay] * k_members if weight_decays is None else [float(x) for x in weight_decays]
    if len(lams) != k_members or any(x < 0 for x in lams):
        raise InputError(f"weight_decays must be {k_members} non-negative numbers, got {weight_decays!r}")

    models = [make_model(k) for k in range(k_members)]
    for m in models:
        m.train()
    ref = models[0]
    names = {id(p): n for n, p in ref.named_parameters()}
    groups = param_groups(ref, cfg)
    order = [names[id(p)] for g in groups for p in g["params"]]          # the trainer's order
    decays = {names[id(p)] for p in groups[0]["params"]}
    stacked, _ = stack_module_state(models)                              # detached leaves, requires_grad
    # buffers (RoPE inv_freq) are the same for every member: passed once, not vmapped
    buffers = {n: b for n, b in ref.named_buffers()}
    params = [stacked[n] for n in order]
    dec = [stacked[n] for n in order if n in decays]
    opt = torch.optim.AdamW([{"params": params, "weight_decay": 0.0}], lr=cfg.lr, betas=cfg.betas,
                            eps=cfg.eps, foreach=True)
    loss_k = torch.vmap(_member_loss(ref, logits_only), in_dims=(0, None, 0, 0))
    rows: list[list[dict]] = [[] for _ in range(k_members)]
    lam = torch.tensor(lams, dtype=torch.float64)
    for step in range(cfg.steps):
        bs = [batch_fn(step, k) for k in range(k_members)]
        ids = torch.stack([b["input_ids"] for b in bs])
        labels = torch.stack([b["labels"] for b in bs])
        lr = cfg.lr * lr_factor(step, cfg)
        opt.param_groups[0]["lr"] = lr
        with warnings.catch_warnings():
            # vmap has no batching rule for the CPU flash-SDPA kernel and loops over the members
            # there (one reason the result equals K separate runs); torch warns on every call
            warnings.filterwarnings("ignore", message=".*batching rule for aten::_scaled_dot_product")
            losses = loss_k(stacked, buffers, ids, labels)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        norms = member_clip_([p.grad for p in params], cfg.grad_clip)
        if dec and any(lams):
            # AdamW's decoupled decay, θ ← θ·(1 − γ_t λ): the factor is formed in float64 like the
            # Python scalar torch.optim forms, then rounded to float32 as the CPU kernel does
            shrink = (1 - lr * lam).to(torch.float32)
            with torch.no_grad():
                for p in dec:
                    p.mul_(shrink.view(-1, *([1] * (p.ndim - 1))))
        opt.step()
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            lv, nv = losses.detach().tolist(), norms.tolist()
            for k in range(k_members):
                rows[k].append({"step": done, "loss": lv[k], "lr": lr, "grad_norm": nv[k]})
    with torch.no_grad():
        for k, m in enumerate(models):
            for n, p in m.named_parameters():
                p.copy_(stacked[n][k])
            m.eval()
    return models, rows
