"""RaBitQCache sparse attention inside a transformers model (arXiv
2606.31519; after the official code's pyimpl `attention.py`).

`SparseAttention(model, cfg)` registers an attention function with transformers'
`AttentionInterface` and switches the model to it, so `model(...)`, `model.generate(...)` and
lm-eval's HFLM all run through it. Per layer:

- prefill (a forward whose keys are all new): dense causal attention exactly as transformers'
  eager attention; calibration c_q = mean prefill query, c_k = mean prefill key (per head);
  keys [I, ⌊L/I⌋·I) encoded (I = `quantize_interval`).
- decode (one query token): layers < `skip_layers` dense; else tokens [0, I) and the not yet
  encoded tail [⌊L/I⌋·I, L) are always kept, new keys are encoded lazily in whole batches of I,
  and the middle region is scored and selected by `method`:
  `rabitq` (RaBitQ estimate → softmax → Top-p), `int4key` (per-token 4-bit keys → softmax →
  Top-p), `quest` (page bounds, fixed budget), `oracle` (exact top-k, fixed budget), `random`,
  or `dense`. Exact attention (true logits, softmax) then runs over the kept tokens only.

Selection is per query head (the accuracy implementation's choice; the vLLM fork shares one set
per KV head). Keys are repeated over GQA groups before encoding, as in the pyimpl. With
`record=True` every sparse decode step logs, per (batch, head): the true attention mass kept,
the mass of the selected middle tokens over the middle's mass, the budget, the relative error of
the attention output against dense attention, and bytes read (I/O proxy).
"""
from __future__ import annotations

import copy
import math

import torch

from methods.core.results import InputError

from . import rabitq as R, selection as S
from .config import SparseConfig

NAME = "rabitqcache"


class LayerState:
    """Calibration and encoded keys of one layer for the current batch of sequences."""

    def __init__(self, rot, c_q, c_k, interval):
        self.rot, self.c_q, self.c_k = rot, c_q, c_k
        self.nq = interval          # keys [interval, nq) are encoded
        self.codes: R.KeyCodes | None = None

    def encode_upto(self, k: torch.Tensor, interval: int) -> None:
        """Lazy update: encode whole batches of `interval` new keys (the official code's "lazy update")."""
        new = (k.shape[2] // interval) * interval
        if new <= self.nq:
            return
        kc = R.encode_keys(k[:, :, self.nq:new], self.rot, self.c_k, self.c_q)
        self.codes = kc if self.codes is None else self.codes.cat(kc)
        self.nq = new


class SparseAttention:
    def __init__(self, model, cfg: SparseConfig, record: bool = False, capture: bool = False):
        self.cfg, self.record, self.capture = cfg, record, capture
        self.states: dict[int, LayerState] = {}
        self.records: list[dict] = []
        self.captured: dict[int, dict] = {}
        self.capture_layers: set[int] | None = None
        self.step = 0
        self.gen = torch.Generator().manual_seed(cfg.rotation_seed + 7919)
        self.attach(model)

    # ------------------------------------------------------------------ plumbing ----
    def attach(self, model) -> None:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

        AttentionInterface.register(NAME, _forward)
        # eager: additive float masks, as transformers' eager attention gets them; sdpa: boolean
        # masks or None (causal), so a long prefill never materialises an L×L float mask
        AttentionMaskInterface.register(NAME, eager_mask if self.cfg.prefill_impl == "eager" else sdpa_mask)
        model.config._attn_implementation = NAME
        self._modules = {}
        for m in model.modules():
            if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups"):
                m._rabitqcache = self
                self._modules[m.layer_idx] = m
        if not self._modules:
            raise InputError("no attention modules with layer_idx found: not a Llama-style model")

    def snapshot(self) -> dict:
        return copy.deepcopy(self.states)

    def restore(self, states: dict) -> None:
        self.states = copy.deepcopy(states)

    def rotation(self, layer: int, d: int, device) -> torch.Tensor:
        """One P per layer shared by its heads (pyimpl), a pure function of (seed, layer)."""
        g = torch.Generator().manual_seed(self.cfg.rotation_seed * 100_003 + layer)
        return R.random_rotation(d, g).to(device)

    # ------------------------------------------------------------------- forward ----
    def forward(self, layer, query, key, value, mask, scaling, groups):
        from transformers.models.llama.modeling_llama import repeat_kv

        cfg = self.cfg
        # transformers' own repeat (expand + reshape): another layout changes matmul rounding
        k, v = repeat_kv(key, groups), repeat_kv(value, groups)
        lq, lk = query.shape[2], k.shape[2]
        if cfg.prefill_impl == "sdpa" and lq > 1:
            return self._prefill_sdpa(layer, query, key, value, k, mask, scaling)
        if mask is not None and mask.dtype == torch.bool:   # sdpa-style mask at decode
            mask = torch.zeros(mask.shape, dtype=query.dtype, device=mask.device).masked_fill(
                ~mask, torch.finfo(query.dtype).min)
        # exactly transformers' eager attention: the same ops in the same order
        logits = torch.matmul(query, k.transpose(2, 3)) * scaling
        if mask is not None:
            logits = logits + mask
        if lq == lk:
            self._calibrate(layer, query, k)
        state = self.states.get(layer)
        if state is not None:
            if cfg.method == "rabitq":
                state.encode_upto(k, cfg.quantize_interval)
            else:  # the baselines read the keys themselves; only the region boundary moves
                state.nq = max(state.nq, (lk // cfg.quantize_interval) * cfg.quantize_interval)
        sparse = (lq == 1 and lq != lk and layer >= cfg.skip_layers and cfg.method != "dense"
                  and state is not None and state.nq > cfg.quantize_interval)
        keep = self._select(layer, query, k, logits, mask, scaling, state) if sparse else None
        w = logits if keep is None else logits.masked_fill(~keep.unsqueeze(2), float("-inf"))
        probs = torch.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
        out = torch.matmul(probs, v)
        if lq == 1 and lq != lk and layer >= cfg.skip_layers and (self.record or self.capture):
            dense_p = probs if keep is None else torch.softmax(logits, -1, dtype=torch.float32).to(query.dtype)
            dense_out = out if keep is None else torch.matmul(dense_p, v)
            if self.record:
                self._record(layer, state, keep, dense_p, out, dense_out, lk, query.shape[-1])
            if self.capture and (self.capture_layers is None or layer in self.capture_layers):
                self._capture(layer, query, k, v, dense_p, state)
        return out.transpose(1, 2).contiguous(), probs

    def _calibrate(self, layer, query, k) -> None:
        """A new sequence: centroids from the prefill (as the official code calibrates at prefill)."""
        if self.cfg.center:
            c_q, c_k = query.float().mean(2), k.float().mean(2)
        else:
            c_q = c_k = torch.zeros_like(query[:, :, 0], dtype=torch.float32)
        self.states[layer] = LayerState(self.rotation(layer, query.shape[-1], query.device),
                                        c_q, c_k, self.cfg.quantize_interval)

    def _prefill_sdpa(self, layer, query, key, value, k, mask, scaling):
        """Long-context prefill: transformers' sdpa attention (no L×L matrix in memory)."""
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        if query.shape[2] == k.shape[2]:
            self._calibrate(layer, query, k)
        if self.cfg.method == "rabitq" and layer in self.states:
            self.states[layer].encode_upto(k, self.cfg.quantize_interval)
        return sdpa_attention_forward(self._modules[layer], query, key, value, mask, scaling=scaling)

    def _select(self, layer, query, k, logits, mask, scaling, state):
        cfg, interval = self.cfg, self.cfg.quantize_interval
        q = query[:, :, 0]                                   # [B, H, D]
        mid = slice(interval, state.nq)
        n_mid = state.nq - interval
        mid_mask = None if mask is None else mask[:, :, 0, mid]
        if cfg.method in ("rabitq", "int4key"):
            if cfg.method == "rabitq":
                qs = R.prepare_query(q, state.rot, state.c_q, state.c_k)
                est = R.estimate_int4(qs, state.codes) if cfg.query_bits == 4 else R.estimate_fp(qs, state.codes)
            else:
                khat = S.int4_token_dequant(k[:, :, mid].float())
                est = (khat @ q.float().unsqueeze(-1)).squeeze(-1)
            s_hat = est * scaling
            if mid_mask is not None:
                s_hat = s_hat + mid_mask
            sel = S.top_p_mask(torch.softmax(s_hat, dim=-1), cfg.top_p)
        else:
            kk = S.n_budget(cfg.budget, n_mid)
            if cfg.method == "oracle":
                sel = S.topk_mask(logits[:, :, 0, mid], kk)
            elif cfg.method == "quest":
                sel = S.quest_mask(q.float(), k[:, :, mid].float(), cfg.quest_page, kk)
            else:
                sel = S.random_mask(tuple(q.shape[:2]) + (n_mid,), kk, self.gen).to(q.device)
        keep = torch.ones(logits.shape[:2] + (logits.shape[-1],), dtype=torch.bool, device=q.device)
        keep[:, :, mid] = sel
        return keep

    # ------------------------------------------------------------------- metrics ----
    def meta_bytes(self, d: int) -> float:
        """Bytes of selection metadata read per middle token (I/O proxy, claim 7)."""
        cfg, b = self.cfg, self.cfg.fp16_bytes
        return {"rabitq": d / 8 + 3 * 4, "int4key": d / 2 + 2 * b, "quest": 2 * d * b / cfg.quest_page,
                "oracle": d * b, "random": 0.0, "dense": 0.0}[cfg.method]

    def _record(self, layer, state, keep, dense_p, out, dense_out, lk, d):
        interval = self.cfg.quantize_interval
        p = dense_p[:, :, 0].float()                        # [B, H, L]
        nq = state.nq if state is not None else lk
        n_mid = max(0, nq - interval)
        if keep is None:
            kept = torch.full(p.shape[:2], float(lk))
            mass, mid_mass, budget = torch.ones(p.shape[:2]), torch.ones(p.shape[:2]), torch.ones(p.shape[:2])
            meta = 0.0
        else:
            kf = keep.float()
            kept = kf.sum(-1)
            mass = (p * kf).sum(-1)
            pm = p[:, :, interval:nq]
            mid_mass = (pm * kf[:, :, interval:nq]).sum(-1) / pm.sum(-1).clamp_min(1e-30)
            budget = kf[:, :, interval:nq].sum(-1) / max(1, n_mid)
            meta = n_mid * self.meta_bytes(d)
        err = (out - dense_out).float().norm(dim=-1)[:, :, 0] / dense_out.float().norm(dim=-1)[:, :, 0].clamp_min(1e-30)
        full = lk * 2 * d * self.cfg.fp16_bytes
        io = (meta + kept * 2 * d * self.cfg.fp16_bytes) / full
        self.records.append({"layer": layer, "step": self.step, "n_mid": n_mid, "length": lk,
                             "recall": mass.cpu(), "recall_mid": mid_mass.cpu(), "budget": budget.cpu(),
                             "rel_err": err.cpu(), "io": io.cpu()})

    def _capture(self, layer, query, k, v, dense_p, state):
        c = self.captured.setdefault(layer, {"q": [], "probs": []})
        c["q"].append(query[:, :, 0].float().cpu())
        c["probs"].append(dense_p[:, :, 0].float().cpu())
        c["k"], c["v"] = k.float().cpu(), v.float().cpu()
        c["c_q"], c["c_k"] = state.c_q.cpu(), state.c_k.cpu()


def _forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    ctl = getattr(module, "_rabitqcache", None)
    if ctl is None:
        raise InputError(f"attention implementation {NAME!r} needs a SparseAttention attached to the model")
    scaling = module.scaling if scaling is None else scaling
    return ctl.forward(module.layer_idx, query, key, value, attention_mask, scaling, module.num_key_value_groups)


def aggregate(records: list[dict]) -> dict:
    """Means over every recorded (step, layer, batch row, head) and the budget's coefficient of
    variation (std/mean) across them (adaptivity, claim 4)."""
    if not records:
        return {}
    cat = {k: torch.cat([r[k].flatten() for r in records]).double()
           for k in ("recall", "recall_mid", "budget", "rel_err", "io")}
    b = cat["budget"]
    return {**{k: float(v.mean()) for k, v in cat.items()},
            "budget_cv": float(b.std() / b.mean()) if b.mean() > 0 else math.nan,
            "recall_min": float(cat["recall"].min()), "n": int(b.numel())}
