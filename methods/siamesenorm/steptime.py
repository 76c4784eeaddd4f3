"""Training-step time of each norm scheme, measured side by side (claim C4).

All schemes are built at the same size with the same batch and timed interleaved in one
process: round r times one AdamW step (forward, backward, update) of every scheme in turn (the
order reversed every other round, so no scheme always runs first), so a slow moment of the
machine hits every scheme alike. Per scheme: the median ms per step; and against Pre-Norm the
ratio of the two steps *of the same round*, whose median over rounds is the reported ratio,
with a 95% percentile-bootstrap interval of that median over rounds (scipy.stats.bootstrap).
A claim on the ratio is decided by the interval (`methods.core.claims`): inconclusive when it
straddles the threshold, as it does when load on the machine makes the ratio wander.
`benchmarks/siamesenorm.py` calls the same function at larger widths.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check, PosInt
from methods.core.models import ModelConfig

from .config import Scheme, StepTimeSection
from .model import SiameseNormConfig, SiameseNormForCausalLM


@dataclass
class StepTimeConfig(StepTimeSection):
    """The `steptime` section plus the sweep's model, schemes and batch shape (the workflow
    merges them in from `run` and `schemes`)."""
    model: ModelConfig
    schemes: Annotated[list[Scheme], Check(min_items=1, unique_items=True)]
    batch_size: PosInt
    seq_len: PosInt


def time_schemes(cfg: StepTimeConfig, device: str | None = None, clock=time.perf_counter) -> dict:
    """Median step time per scheme, and per-round ratios to Pre-Norm (see the module). The models
    run on `device`, by default the active runtime's (the GPU of a paper-scale job), with the
    trainer's precision policy: fp32 master weights and the forward under autocast to the
    compute dtype (a no-op in fp32). `clock`: seconds (a test passes its own)."""
    import torch

    from methods.core.runtime import current

    rt = current()
    device = torch.device(device) if device is not None else rt.device
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g).to(device)
    runs = {}
    for s in cfg.schemes:
        torch.manual_seed(cfg.seed)
        m = cfg.model
        model = SiameseNormForCausalLM(SiameseNormConfig(
            vocab_size=cfg.vocab_size, hidden_size=m.d_model, intermediate_size=m.d_ff,
            num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads, num_key_value_heads=m.n_kv_heads,
            max_position_embeddings=max(m.max_seq_len, cfg.seq_len), norm_scheme=s))
        model.to(device=device, dtype=rt.weight_dtype(training=True))
        runs[s] = (model, torch.optim.AdamW(model.parameters(), lr=1e-4))

    def step(model, opt):
        with rt.autocast():
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":  # kernels are asynchronous: the clock waits for the device
            torch.cuda.synchronize()

    times = {s: [] for s in cfg.schemes}
    for r in range(cfg.warmup + cfg.rounds):
        for s in (cfg.schemes if r % 2 == 0 else cfg.schemes[::-1]):
            t0 = clock()
            step(*runs[s])
            dt = clock() - t0
            if r >= cfg.warmup:
                times[s].append(dt)
    ms = {s: 1000 * statistics.median(t) for s, t in times.items()}
    out = {"ms_per_step": ms, "ratio_vs_pre": {}, "ratio_interval": {}, "ratios_by_round": {},
           "n_params": {s: sum(p.numel() for p in runs[s][0].parameters()) for s in cfg.schemes},
           "tokens_per_step": cfg.batch_size * cfg.seq_len, "rounds": cfg.rounds}
    if "pre" in times:
        for s, t in times.items():
            ratios = [a / b for a, b in zip(t, times["pre"])]
            out["ratios_by_round"][s] = ratios
            out["ratio_vs_pre"][s] = statistics.median(ratios)
            if len(ratios) >= 2:
                out["ratio_interval"][s] = median_interval(ratios, seed=cfg.seed)
    return out


def median_interval(values, level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Percentile-bootstrap interval of the median of `values` (the rounds are the units),
    as `methods.core.stats.interval_record`; a single value when all are equal."""
    import numpy as np
    from scipy.stats import bootstrap

    from methods.core.stats import interval_record

    x = np.asarray(values, dtype=float)
    method = "bootstrap (median of per-round ratios)"
    if np.ptp(x) == 0:
        return interval_record(float(x[0]), float(x[0]), method=method, n=x.size, level=level, unit="item")
    res = bootstrap((x,), np.median, confidence_level=level, n_resamples=n_resamples, method="percentile",
                    random_state=np.random.default_rng(seed))
    ci = res.confidence_interval
    return interval_record(ci.low, ci.high, method=method, n=x.size, level=level, unit="item")
