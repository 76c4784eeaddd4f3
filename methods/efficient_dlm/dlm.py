"""Efficient-DLM core: attention patterns, the conversion objective, position-dependent masking,
and the block-wise parallel decoder with a clean-context KV cache.

The forward pass runs a transformers `LlamaForCausalLM`'s own modules (embedding, RMSNorms,
q/k/v/o, RoPE, SwiGLU, head) with an explicit boolean attention mask through
`scaled_dot_product_attention`, so any of the attention patterns above, and a KV cache, can be used with
the AR weights unchanged. The mask token is the tokenizer's `<unk>` (never in the data).
Any other architecture (paper scale: Qwen3, whose attention also normalises q and k) runs its own
transformers forward with the same mask handed over as a 4-D mask and a `DynamicCache`
(`hf_forward`); both paths have the same contract.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

PATTERNS = ("causal", "full", "blk_noisy", "blk_clean")


# ---------------------------------------------------------------- attention masks (1 = may attend)
def attention_mask(pattern: str, L: int, block: int, clean_intra: str = "causal") -> torch.Tensor:
    """Boolean [Q, K] mask. `causal`/`full`/`blk_noisy` act on one stream of length L;
    `blk_clean` on the two-stream input [x_t ; x_0] of length 2L (noisy copy first)."""
    i = torch.arange(L)
    b = i // block
    if pattern == "causal":
        return i[:, None] >= i[None, :]
    if pattern == "full":
        return torch.ones(L, L, dtype=torch.bool)
    if pattern == "blk_noisy":  # block-causal over the noisy stream (bidirectional within a block)
        return b[:, None] >= b[None, :]
    if pattern == "blk_clean":
        nn_ = b[:, None] == b[None, :]                       # noisy → own noisy block
        nc = b[:, None] > b[None, :]                         # noisy → clean earlier blocks
        if clean_intra == "bidir":
            cc = b[:, None] >= b[None, :]
        elif clean_intra == "causal":
            cc = i[:, None] >= i[None, :]                    # block-causal + causal within = causal
        else:
            raise ValueError(f"clean_intra must be bidir or causal, got {clean_intra!r}")
        top = torch.cat([nn_, nc], 1)
        bot = torch.cat([torch.zeros(L, L, dtype=torch.bool), cc], 1)
        return torch.cat([top, bot], 0)
    raise ValueError(f"unknown attention pattern {pattern!r} (one of {PATTERNS})")


# ---------------------------------------------------------------- forward with explicit mask + cache
def _manual(model) -> bool:
    """The tiny path: a plain LlamaForCausalLM runs through the explicit loop of `forward` (the
    code the tiny-scale numbers were made with); everything else through `hf_forward`."""
    from transformers import LlamaForCausalLM

    return type(model) is LlamaForCausalLM


def forward(model, input_ids, position_ids, mask, cache=None, return_hidden=False):
    """Logits [N, Q, V] of a causal LM under `mask` ([Q, K] or [N, Q, K] bool, K = cached +
    Q). `cache` is a list of per-layer (k, v) [N, H, T, D] or None; returns (logits, new_kv) where
    new_kv are the per-layer k/v of `input_ids` only (the caller decides what to keep).
    A LlamaForCausalLM runs the explicit loop below; any other model its own forward (`hf_forward`)."""
    if not _manual(model):
        return hf_forward(model, input_ids, position_ids, mask, cache)
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    m = model.model
    cfg = model.config
    h = m.embed_tokens(input_ids)
    cos, sin = m.rotary_emb(h, position_ids)
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    hd = cfg.hidden_size // nh
    N, Q = input_ids.shape
    am = mask if mask.dim() == 3 else mask.expand(N, *mask.shape)
    am = am[:, None].to(h.device)
    new_kv = []
    for li, layer in enumerate(m.layers):
        a = layer.self_attn
        x = layer.input_layernorm(h)
        q = a.q_proj(x).view(N, Q, nh, hd).transpose(1, 2)
        k = a.k_proj(x).view(N, Q, nkv, hd).transpose(1, 2)
        v = a.v_proj(x).view(N, Q, nkv, hd).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        new_kv.append((k, v))
        if cache is not None:
            k = torch.cat([cache[li][0], k], 2)
            v = torch.cat([cache[li][1], v], 2)
        if nkv != nh:
            k = k.repeat_interleave(nh // nkv, 1)
            v = v.repeat_interleave(nh // nkv, 1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=am)
        h = h + a.o_proj(o.transpose(1, 2).reshape(N, Q, nh * hd))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    h = m.norm(h)
    return model.lm_head(h), new_kv


def _base(model):
    """The transformers model inside a torch.compile / DDP wrapper (the trainer's `fwd`)."""
    for attr in ("_orig_mod", "module"):
        model = getattr(model, attr, model)
    return model


def device_of(model):
    return _base(model).get_input_embeddings().weight.device


def hf_mask(model, mask, N):
    """The [N, 1, Q, K] mask handed to a transformers model: boolean (True = may attend) for its
    `sdpa` attention, which passes it to `scaled_dot_product_attention` as is; additive (0 /
    dtype min) for `eager`. transformers returns a 4-D mask unchanged (masking_utils: "already
    prepared, or custom"), so it is exactly the attention pattern."""
    from methods.core.results import InputError

    am = (mask if mask.dim() == 3 else mask.expand(N, *mask.shape))[:, None]
    impl = getattr(_base(model).config, "_attn_implementation", None) or "eager"
    if impl == "sdpa":
        return am
    if impl == "eager":
        dtype = next(model.parameters()).dtype
        return torch.zeros(am.shape, dtype=dtype, device=am.device).masked_fill(~am, torch.finfo(dtype).min)
    raise InputError(f"efficient_dlm: attention implementation {impl!r} cannot take a dense block mask "
                     "(load the model with attn_implementation sdpa or eager)")


def hf_forward(model, input_ids, position_ids, mask, cache=None):
    """`forward`'s contract through the model's own transformers forward: the pattern mask as a
    4-D mask (`hf_mask`), explicit position ids (the two-stream layout repeats 0..L−1), and the
    per-layer (k, v) list as a `DynamicCache` (k after RoPE and any q/k norm, as transformers caches
    it); new_kv are the last Q cached entries of every layer."""
    from transformers import DynamicCache

    N, Q = input_ids.shape
    dev = _base(model).get_input_embeddings().weight.device
    pkv = DynamicCache()
    for li, (k, v) in enumerate(cache or []):
        pkv.update(k, v, li)
    import inspect

    # transformers 5 names the cache argument `cache` (`past_key_values` before); the cache is
    # filled in place, so its layers hold the new k/v whichever name the forward takes
    name = "cache" if "cache" in inspect.signature(_base(model).forward).parameters else "past_key_values"
    out = model(input_ids=input_ids.to(dev), position_ids=position_ids.to(dev),
                attention_mask=hf_mask(model, mask.to(dev), N), use_cache=True, **{name: pkv})
    new_kv = [(layer.keys[:, :, -Q:], layer.values[:, :, -Q:]) for layer in pkv.layers]
    return out.logits, new_kv


# ---------------------------------------------------------------- position-dependent masking
def mask_probs(t: torch.Tensor, block: int, beta: float) -> torch.Tensor:
    """Per-position masking probability p_i = min(1, t·B·w_i/Σw), w_i = exp(β(1−t)i) (arXiv 2512.14067
    Eq. 2 as given by third-party notes, NV; the mapping to p_i is our choice);
    t: [...] noise levels → [..., B]. β = 0 gives p_i = t (uniform)."""
    i = torch.arange(block, dtype=torch.float32)
    logw = beta * (1 - t)[..., None] * i
    w = torch.softmax(logw, -1)                      # w_i / Σ_j w_j
    return torch.clamp(t[..., None] * block * w, max=1.0)


def sample_noise(x0, block, beta, eps, gen, mask_id, keep_first=False):
    """Per-(row, block) t ~ U(eps, 1) and Bernoulli masks → (x_t, masked bool, t per token)."""
    N, L = x0.shape
    nb = L // block
    t = eps + (1 - eps) * torch.rand(N, nb, generator=gen)
    p = mask_probs(t, block, beta).reshape(N, L)
    masked = torch.rand(N, L, generator=gen) < p
    if keep_first:
        masked[:, 0] = False
    masked, t = masked.to(x0.device), t.to(x0.device)     # drawn on the CPU generator, used where x0 is
    xt = torch.where(masked, torch.full_like(x0, mask_id), x0)
    return xt, masked, t.repeat_interleave(block, 1)


def diffusion_loss(model, x0, variant: dict, block: int, gen, mask_id, eps=1e-3):
    """Conversion objective: (1/t)-weighted CE on masked noisy positions, divided by N·L.
    variant: {"pattern": full|blk_noisy|blk_clean, "shift": bool, "beta": float, "clean_intra"}."""
    N, L = x0.shape
    shift = variant["shift"]
    xt, masked, tt = sample_noise(x0, block, variant["beta"], eps, gen, mask_id, keep_first=shift)
    pos = torch.arange(L, device=x0.device).expand(N, L)
    pat = variant["pattern"]
    if pat == "blk_clean":
        ids = torch.cat([xt, x0], 1)
        mask = attention_mask(pat, L, block, variant.get("clean_intra", "causal"))
        logits, _ = forward(model, ids, torch.cat([pos, pos], 1), mask)
        logits = logits[:, :L]
    else:
        logits, _ = forward(model, xt, pos, attention_mask(pat, L, block))
    if shift:  # logit at i−1 predicts token i
        logits = torch.cat([logits[:, :1], logits[:, :-1]], 1)
    ce = F.cross_entropy(logits.float().flatten(0, 1), x0.flatten(), reduction="none").view(N, L)
    return (ce * masked / tt).sum() / (N * L)


# ---------------------------------------------------------------- decoding
def _left_pad(prompts, pad_id, device=None):
    P = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), P), pad_id, dtype=torch.long)
    valid = torch.zeros(len(prompts), P, dtype=torch.bool)
    for r, p in enumerate(prompts):
        ids[r, P - len(p):] = torch.tensor(p)
        valid[r, P - len(p):] = True
    start = (P - valid.sum(1))                       # pads before the first real token
    if device is not None:
        ids, valid, start = ids.to(device), valid.to(device), start.to(device)
    return ids, valid, start


def _key_mask(qmask, valid_k):
    """[N, Q, K] = pattern mask ∧ valid keys, with a self-edge so pad rows are never empty."""
    m = qmask & valid_k[:, None, :]
    Q, K = m.shape[1], m.shape[2]
    diag = torch.zeros(Q, K, dtype=torch.bool, device=m.device)
    diag[torch.arange(Q), K - Q + torch.arange(Q)] = True
    return m | diag


def _stop_rows(gen_tokens, stop_ids):
    s = torch.zeros(gen_tokens.shape[0], dtype=torch.bool, device=gen_tokens.device)
    for t in stop_ids:
        s |= (gen_tokens == t).any(1)
    return s


@torch.no_grad()
def decode_dlm(model, prompts, *, block, threshold, max_new, mask_id, pad_id, stop_ids,
               mode="cache", shift=False, temperature=1.0):
    """Block-by-block parallel decoding; commit every masked position whose confidence (max softmax
    prob) ≥ threshold, at least the most confident one. mode="cache": clean context in a KV cache
    (causal), the pending clean tokens (prompt, then the last finished block) go in the same forward
    as the next noisy block; mode="full": the whole sequence re-run with full attention each step
    (Dream-like, no cache). Returns (generated ids [N, ≤max_new], nfe per row).

    The mask token is never a prediction: its logit is set to −∞ before the softmax (the "zero
    masking probabilities" of MDLM's SUBS parameterisation, Sahoo et al., arXiv 2406.07524, which
    block diffusion, arXiv 2503.09573, keeps), so every forward commits ≥ 1
    position of every unfinished row and a block takes at most `block` forwards. The loop is
    also capped at `block` forwards per block, so decoding terminates whatever the model does."""
    dev = device_of(model)
    ids, valid, start = _left_pad(prompts, pad_id, dev)
    N, P = ids.shape
    nfe = torch.zeros(N, dtype=torch.long, device=dev)
    done = torch.zeros(N, dtype=torch.bool, device=dev)
    gen = torch.empty(N, 0, dtype=torch.long, device=dev)
    cache, cache_valid, pending, pend_valid = None, torch.zeros(N, 0, dtype=torch.bool, device=dev), ids, valid
    for _ in range(math.ceil(max_new / block)):
        cur = torch.full((N, block), mask_id, dtype=torch.long, device=dev)
        first = True
        for _ in range(block):          # each forward commits ≥ 1 position per unfinished row
            still = (cur == mask_id) & ~done[:, None]
            if not still.any():
                break
            if mode == "full":
                seq = torch.cat([ids, gen, cur], 1)
                vk = torch.cat([valid, torch.ones(N, seq.shape[1] - P, dtype=torch.bool, device=dev)], 1)
                pos = (torch.arange(seq.shape[1], device=dev)[None] - start[:, None]).clamp(min=0)
                mask = _key_mask(torch.ones(N, seq.shape[1], seq.shape[1], dtype=torch.bool, device=dev), vk)
                logits, _ = forward(model, seq, pos, mask)
                if shift:
                    logits = logits[:, -block - 1:-1]
                else:
                    logits = logits[:, -block:]
            else:
                T = cache_valid.shape[1]
                chunk = torch.cat([pending, cur], 1) if first else cur
                Pn = pending.shape[1] if first else 0
                Qn = chunk.shape[1]
                pos = (T + torch.arange(Qn, device=dev)[None] - start[:, None]).clamp(min=0)
                qm = torch.zeros(Qn, T + Qn, dtype=torch.bool, device=dev)
                qm[:, :T] = True
                ar = torch.arange(Pn, device=dev)
                qm[:Pn, T:T + Pn] = ar[:, None] >= ar[None, :]       # pending clean: causal
                qm[Pn:, T:] = True                                    # noisy block: clean + itself
                vk = torch.cat([cache_valid, pend_valid if first else torch.zeros(N, 0, dtype=torch.bool, device=dev),
                                torch.ones(N, block, dtype=torch.bool, device=dev)], 1)
                logits, kv = forward(model, chunk, pos, _key_mask(qm.expand(N, -1, -1), vk), cache)
                if first and Pn:
                    kvp = [(k[:, :, :Pn], v[:, :, :Pn]) for k, v in kv]
                    cache = kvp if cache is None else [(torch.cat([c[0], k], 2), torch.cat([c[1], v], 2))
                                                       for c, (k, v) in zip(cache, kvp)]
                    cache_valid = torch.cat([cache_valid, pend_valid], 1)
                logits = logits[:, -block:]
            first = False
            logits = logits.float().clone()
            logits[..., mask_id] = float("-inf")         # never commit the mask token
            probs = torch.softmax(logits / temperature, -1)
            conf, tok = probs.max(-1)
            conf = torch.where(still, conf, torch.full_like(conf, -1.0))
            commit = still & (conf >= threshold)
            best = conf.argmax(1)
            has = still.any(1)
            commit[torch.arange(N, device=dev)[has], best[has]] = True
            cur = torch.where(commit, tok, cur)
            nfe += has.long()
        gen = torch.cat([gen, cur], 1)
        pending, pend_valid = cur, torch.ones(N, block, dtype=torch.bool, device=dev)
        done |= _stop_rows(cur, stop_ids)
        if done.all():
            break
    return gen[:, :max_new].cpu(), nfe.cpu()


@torch.no_grad()
def decode_ar(model, prompts, *, max_new, pad_id, stop_ids):
    """Greedy one-token-per-forward decoding with a KV cache (the AR reference)."""
    dev = device_of(model)
    ids, valid, start = _left_pad(prompts, pad_id, dev)
    N, P = ids.shape
    nfe = torch.zeros(N, dtype=torch.long, device=dev)
    done = torch.zeros(N, dtype=torch.bool, device=dev)
    out = []
    cache, cache_valid, chunk, cvalid = None, torch.zeros(N, 0, dtype=torch.bool, device=dev), ids, valid
    stops = torch.tensor(stop_ids, device=dev)
    for _ in range(max_new):
        T, Qn = cache_valid.shape[1], chunk.shape[1]
        pos = (T + torch.arange(Qn, device=dev)[None] - start[:, None]).clamp(min=0)
        qm = torch.ones(Qn, T + Qn, dtype=torch.bool, device=dev)
        ar = torch.arange(Qn, device=dev)
        qm[:, T:] = ar[:, None] >= ar[None, :]
        vk = torch.cat([cache_valid, cvalid], 1)
        logits, kv = forward(model, chunk, pos, _key_mask(qm.expand(N, -1, -1), vk), cache)
        cache = kv if cache is None else [(torch.cat([c[0], k], 2), torch.cat([c[1], v], 2))
                                          for c, (k, v) in zip(cache, kv)]
        cache_valid = vk
        nfe += (~done).long()
        nxt = logits[:, -1].argmax(-1)
        out.append(nxt)
        done |= torch.isin(nxt, stops)
        chunk, cvalid = nxt[:, None], torch.ones(N, 1, dtype=torch.bool, device=dev)
        if done.all():
            break
    return torch.stack(out, 1).cpu(), nfe.cpu()
