"""Training-step time of each norm scheme, measured side by side (claim C4).

All schemes are built at the same size with the same batch and timed interleaved in one
process: round r times one AdamW step (forward, backward, update) of every scheme in turn,
so a slow moment of the machine hits every scheme alike. The result is the median over
rounds per scheme and its ratio to Pre-Norm. `benchmarks/siamesenorm.py` calls the same
function at larger widths.
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


def time_schemes(cfg: StepTimeConfig, device: str | None = None) -> dict:
    """Median step time per scheme. The models run on `device`, by default the active runtime's
    (the GPU of a paper-scale job), with the trainer's precision policy: fp32 master weights
    and the forward under autocast to the compute dtype (a no-op in fp32)."""
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
        for s, (model, opt) in runs.items():
            t0 = time.perf_counter()
            step(model, opt)
            if r >= cfg.warmup:
                times[s].append(time.perf_counter() - t0)
    ms = {s: 1000 * statistics.median(t) for s, t in times.items()}
    base = ms.get("pre")
    return {"ms_per_step": ms, "ratio_vs_pre": {s: v / base for s, v in ms.items()} if base else {},
            "n_params": {s: sum(p.numel() for p in runs[s][0].parameters()) for s in cfg.schemes},
            "tokens_per_step": cfg.batch_size * cfg.seq_len, "rounds": cfg.rounds}
