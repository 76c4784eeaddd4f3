"""Probes on a trained model (the gradient-collective comparison and claims A1/A3):

* gradient collectives over W simulated workers (each a micro-batch of `micro_batch` sequences,
  real gradients of the fp run's final model): relative L2 error of the averaged gradient
  against the exact fp32 mean for QuanGrad, the naive int8 ring and a bf16 all-reduce;
* saved-activation bytes of every variant's bit policy on one fixed batch (measured by the
  hooks) and the relative L2 error of its gradient against the unquantized one.
"""
from __future__ import annotations

from pathlib import Path

from methods.agoq.config import ProbeConfig, Variant


def _grad(model, params, ids, labels, quantizer=None):
    """The flat gradient of one batch, computed as the runs train: on the runtime's device,
    fp32 master weights, forward under its autocast."""
    import contextlib

    import torch.nn.functional as F

    from methods.core.runtime import current

    rt = current()
    ids, labels = rt.to_device(ids), rt.to_device(labels)
    model.zero_grad(set_to_none=True)
    with quantizer if quantizer is not None else contextlib.nullcontext(), rt.autocast():
        logits = model(input_ids=ids).logits
    F.cross_entropy(logits.float().flatten(0, 1), labels.flatten()).backward()
    import torch

    return torch.cat([p.grad.reshape(-1) for p in params])


def run_probe(cfg: ProbeConfig, model_dir, shards_dir, variants: list[Variant]) -> dict:
    import torch

    from methods.core.models import load_model
    from methods.core.shards import ShardedTokenStream

    from .laaq import BitPolicy, SavedActivationQuantizer
    from .quangrad import FP32_SLACK, bf16_mean, naive_ring_mean_sim, quangrad_mean_sim, rel_l2

    model, _ = load_model(model_dir, training=True)  # fp32 master weights, as in training
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    stream = ShardedTokenStream(Path(shards_dir) / "train", cfg.seq_len)
    coll = {}
    for w in cfg.workers:
        acc = {"quangrad": [], "naive_ring": [], "bf16": [], "bound_ok": []}
        for b in range(cfg.n_batches):
            batch = stream.batch(b, w * cfg.micro_batch, cfg.seed + 7919 * w)
            grads = [_grad(model, params, batch["input_ids"][i::w], batch["labels"][i::w]) for i in range(w)]
            exact = torch.stack(grads).mean(0)
            qg, bound = quangrad_mean_sim(grads, cfg.grad_block)
            acc["quangrad"].append(rel_l2(qg, exact))
            acc["naive_ring"].append(rel_l2(naive_ring_mean_sim(grads, cfg.grad_block), exact))
            acc["bf16"].append(rel_l2(bf16_mean(grads), exact))
            acc["bound_ok"].append(bool(((qg - exact).abs() <= bound + FP32_SLACK * exact.abs() + 1e-12).all()))
        coll[str(w)] = {k: (all(x) if k == "bound_ok" else sum(x) / len(x)) for k, x in acc.items()}
    batch = stream.batch(10_000, 16, cfg.seed)
    ref = _grad(model, params, batch["input_ids"], batch["labels"])
    policies = {}
    for v in variants:
        q = SavedActivationQuantizer(model, BitPolicy(*v.policy()), cfg.n_stages, cfg.group_size)
        g = _grad(model, params, batch["input_ids"], batch["labels"], q)
        policies[v.name] = {**q.summary(), "grad_rel_err": rel_l2(g, ref)}
        q.remove()
    return {"collective": coll, "policies": policies, "n_params": sum(p.numel() for p in params)}
