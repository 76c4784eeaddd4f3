"""lm-eval model class for Efficient-DLM (arXiv 2512.14067): a converted block-diffusion LM (or
its AR base, for the side-by-side reference) scored by lm-eval through our own decoders.

    import methods.efficient_dlm.lm   # registers the class with lm-eval's registry
    lm_eval.simple_evaluate(model="efficient_dlm",
                            model_args="pretrained=<converted dir>,threshold=0.9,block=64", tasks=[...])

- `generate_until`: block-parallel decoding with the clean context in a KV cache
  (`dlm.decode_dlm`; `mode=dlm`) or greedy AR decoding with a KV cache (`dlm.decode_ar`;
  `mode=ar`); the text is cut at the first `until` string. Every call adds to `stats`: forwards
  (NFE), positions committed, tokens kept through the stop (useful), decode wall time; tokens
  per forward and tokens/s follow from them, the same counters for both modes, so the AR base and
  the converted model are timed side by side by the same code.
- `loglikelihood` (multiple-choice tasks): `mode=ar` the exact causal log-probability (as
  lm-eval's HF model computes it); `mode=dlm` a Monte-Carlo estimate of the block-diffusion ELBO
  of the continuation (Arriola et al., block diffusion, arXiv 2503.09573, Eq. 7; the per-block
  masked-diffusion bound of MDLM, arXiv 2406.07524), with the context as clean context and the
  continuation cut into blocks from its start, exactly the layout decoding sees: for each of
  `mc_samples` draws, a noise level t per continuation block (stratified over the draws),
  uniform masking, and −Σ_{masked} CE/t; the estimate is the mean over draws. A full-attention
  (Dream-like, token-shift) model is scored with one noise level over the whole continuation and
  full attention over [context ; noisy continuation], its own layout. `is_greedy`: every
  continuation token is the argmax with the whole continuation masked (one forward).
  Results are memoised per (context, continuation): they do not depend on the threshold, so a
  threshold sweep scores them once.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from methods.core.results import InputError

from .dlm import attention_mask, decode_ar, decode_dlm, device_of, forward


def elbo_mask(P: int, M: int, block: int) -> torch.Tensor:
    """Boolean [M + P + M, M + P + M] mask (1 = may attend) of the two-stream input
    [noisy continuation (M) ; clean context + continuation (P + M)]: block 0 is the context, the
    continuation's blocks are 1, 2, ... from its start; a noisy token sees the noisy tokens of its
    own block and the clean tokens of earlier blocks; a clean token sees the clean tokens up to
    itself (causal, as the decoder's cache holds them)."""
    L = P + M
    i = torch.arange(L)
    b = torch.where(i < P, 0, 1 + (i - P) // block)
    bn = b[P:]                                              # the noisy stream's blocks
    nn_ = bn[:, None] == bn[None, :]
    nc = bn[:, None] > b[None, :]
    cc = i[:, None] >= i[None, :]
    top = torch.cat([nn_, nc], 1)
    bot = torch.cat([torch.zeros(L, M, dtype=torch.bool), cc], 1)
    return torch.cat([top, bot], 0)


def cached_elbo_mask(P: int, M: int, block: int) -> torch.Tensor:
    """`elbo_mask` for queries [noisy continuation ; clean continuation] (2M) over keys [cached
    context (P) ; noisy continuation ; clean continuation] (P + 2M): the same pattern with the
    context's clean rows moved into the cache."""
    e = elbo_mask(P, M, block)
    rows = list(range(M)) + list(range(M + P, M + P + M))
    cols = list(range(M, M + P)) + list(range(M)) + list(range(M + P, M + P + M))
    return e[rows][:, cols]


@register_model("efficient_dlm")
class BlockDiffusionLM(LM):
    """A converted Efficient-DLM model (`mode=dlm`) or an AR model (`mode=ar`) for lm-eval."""

    def __init__(self, pretrained=None, mode: str = "dlm", block: int = 32, threshold: float = 0.9,
                 batch_size: int = 16, mc_samples: int = 8, seed: int = 0, max_length: int | None = None,
                 model=None, tokenizer=None, spec: dict | None = None, eps: float = 1e-3, **kwargs):
        super().__init__()
        import json
        from pathlib import Path

        from methods.core.models import load_model
        from methods.core.tokenizer import ensure_pad

        from .run import diffusion_mask_id

        if mode not in ("dlm", "ar"):
            raise InputError(f"efficient_dlm lm-eval model: mode must be dlm or ar, got {mode!r}")
        if model is None:
            if pretrained is None:
                raise InputError("efficient_dlm lm-eval model: pass pretrained=<model dir or hub id>")
            model, tokenizer = load_model(pretrained)
            vf = Path(str(pretrained)) / "variant.json"
            if spec is None and vf.is_file():
                spec = json.loads(vf.read_text())
        self.model, self.tok, self.mode = model, tokenizer, mode
        self.spec = spec or {"pattern": "blk_clean", "shift": False}
        self.block, self.threshold = int(block), float(threshold)
        self.batch_size, self.mc_samples, self.seed, self.eps = int(batch_size), int(mc_samples), int(seed), eps
        self.max_length = int(max_length or getattr(model.config, "max_position_embeddings", 4096))
        self.pad = ensure_pad(tokenizer)
        self.mask_id = diffusion_mask_id(tokenizer) if mode == "dlm" else None
        self.stats = {"nfe": 0, "committed": 0, "useful": 0, "rows": 0, "wall_s": 0.0}
        self._ll: dict[tuple[str, str], tuple[float, bool]] = {}

    # ------------------------------------------------------------------ helpers
    def _enc(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def reset_stats(self):
        self.stats = {k: 0 if k != "wall_s" else 0.0 for k in self.stats}

    # ------------------------------------------------------------------ generation
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from methods.core.tokenizer import stop_index

        out = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            ctx, kw = r.args
            kw = dict(kw or {})
            until = kw.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            key = (tuple(until), int(kw.get("max_gen_toks", 256)))
            groups.setdefault(key, []).append((i, ctx))
        stop_ids = [t for t in [self.tok.eos_token_id] if t is not None]
        for (until, max_new), items in groups.items():
            for s in until:                        # id stops for single-token stop strings
                ids = self._enc(s)
                if len(ids) == 1 and ids[0] not in stop_ids:
                    stop_ids.append(ids[0])
            for b0 in range(0, len(items), self.batch_size):
                chunk = items[b0:b0 + self.batch_size]
                keep = max(1, self.max_length - max_new - self.block)
                prompts = [self._enc(c)[-keep:] or [self.pad] for _, c in chunk]
                t0 = time.perf_counter()
                if self.mode == "ar":
                    g, n = decode_ar(self.model, prompts, max_new=max_new, pad_id=self.pad, stop_ids=stop_ids)
                    committed = n.clone()
                else:
                    g, n = decode_dlm(self.model, prompts, block=self.block, threshold=self.threshold,
                                      max_new=max_new, mask_id=self.mask_id, pad_id=self.pad, stop_ids=stop_ids,
                                      mode="full" if self.spec["pattern"] == "full" else "cache",
                                      shift=self.spec["shift"])
                    committed = (g != self.mask_id).sum(1)
                self.stats["wall_s"] += time.perf_counter() - t0
                self.stats["nfe"] += int(n.sum())
                self.stats["committed"] += int(committed.sum())
                self.stats["rows"] += len(chunk)
                for (i, _), ids in zip(chunk, g.tolist()):
                    ids = ids[:max_new]
                    cut = next((k for k, t in enumerate(ids) if t in stop_ids or t == self.mask_id), None)
                    body = ids if cut is None else ids[:cut]
                    k = stop_index(self.tok, body, list(until))
                    # useful tokens: through the first stop (the token holding a stop string, or the stop id)
                    self.stats["useful"] += k if k < len(body) else (len(body) if cut is None else cut + 1)
                    text = self.tok.decode(body[:k], skip_special_tokens=True)
                    for s in until:
                        text = text.split(s)[0]
                    out[i] = text
        return out

    # ------------------------------------------------------------------ likelihood
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        res = []
        for r in requests:
            ctx, cont = r.args
            key = (ctx, cont)
            if key not in self._ll:
                self._ll[key] = self._score(ctx, cont, len(self._ll))
            res.append(self._ll[key])
        return res

    def _split(self, ctx: str, cont: str) -> tuple[list[int], list[int]]:
        """Token ids of context and continuation, split where lm-eval's HF model splits them."""
        from methods.core.data import encode_prompt_answer

        ids, start = encode_prompt_answer(self.tok, ctx, cont)
        c, y = ids[:start], ids[start:]
        if not y:
            raise InputError(f"efficient_dlm lm-eval model: empty continuation for context {ctx[-40:]!r}")
        if not c:
            c = [self.tok.eos_token_id if self.tok.eos_token_id is not None else self.pad]
        c = c[-max(1, self.max_length - 2 * len(y)):]
        return c, y

    @torch.no_grad()
    def _score(self, ctx: str, cont: str, index: int) -> tuple[float, bool]:
        c, y = self._split(ctx, cont)
        dev = device_of(self.model)
        P, M = len(c), len(y)
        x0 = torch.tensor([c + y], device=dev)
        if self.mode == "ar":
            logits = self.model(input_ids=x0).logits[0, P - 1:-1].float()
            lp = torch.log_softmax(logits, -1)
            yt = x0[0, P:]
            return float(lp.gather(-1, yt[:, None]).sum()), bool((logits.argmax(-1) == yt).all())
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        S = self.mc_samples
        yt = x0[0, P:]
        full = self.spec["pattern"] == "full"
        nb = 1 if full else -(-M // self.block)
        # stratified noise levels: draw s of S in [(s + u)/S], one u per continuation block
        u = torch.rand(nb, generator=g)
        t = self.eps + (1 - self.eps) * ((torch.arange(S)[:, None] + u[None]) / S)      # [S, nb]
        if full:
            tt = t.expand(S, M)
        else:
            blk = torch.arange(M) // self.block
            tt = t[:, blk]                                                              # [S, M]
        masked = torch.rand(S, M, generator=g) < tt
        tt, masked = tt.to(dev), masked.to(dev)
        noisy = torch.where(masked, torch.full_like(masked, self.mask_id, dtype=torch.long), yt.expand(S, M))
        if full:
            ids = torch.cat([x0[:, :P].expand(S, P), noisy], 1)
            pos = torch.arange(P + M, device=dev).expand(S, P + M)
            logits, _ = forward(self.model, ids, pos, attention_mask("full", P + M, 1))
            logits = logits[:, P - 1:-1] if self.spec["shift"] else logits[:, P:]
            greedy_ids = torch.cat([x0[:, :P], torch.full((1, M), self.mask_id, device=dev)], 1)
            gl, _ = forward(self.model, greedy_ids, pos[:1], attention_mask("full", P + M, 1))
            gl = gl[:, P - 1:-1] if self.spec["shift"] else gl[:, P:]
        else:
            # the context is clean and causal in every draw: its k/v are computed once and
            # cached (as the decoder caches its prompt); the draws' [noisy ; clean] continuation
            # streams attend to it. Same numbers as the one-pass two-stream input (`elbo_mask`)
            _, kv = forward(self.model, x0[:, :P], torch.arange(P, device=dev)[None], attention_mask("causal", P, 1))
            mask = cached_elbo_mask(P, M, self.block)
            pos = torch.arange(P, P + M, device=dev).repeat(2)[None]
            ids = torch.cat([noisy, yt.expand(S, M)], 1)
            logits, _ = forward(self.model, ids, pos.expand(S, -1), mask,
                                [(k.expand(S, -1, -1, -1), v.expand(S, -1, -1, -1)) for k, v in kv])
            logits = logits[:, :M]
            # is_greedy: block by block, every token of a fully masked block is the argmax given
            # the clean earlier blocks (one forward with the whole continuation masked)
            gids = torch.cat([torch.full((1, M), self.mask_id, device=dev), yt[None]], 1)
            gl, _ = forward(self.model, gids, pos, mask, kv)
            gl = gl[:, :M]
        logits = logits.float()
        logits[..., self.mask_id] = float("-inf")
        ce = F.cross_entropy(logits.flatten(0, 1), yt.repeat(S), reduction="none").view(S, M)
        elbo = -(ce * masked / tt).sum(1).mean()
        gl = gl.float()
        gl[..., self.mask_id] = float("-inf")
        return float(elbo), bool((gl[0].argmax(-1) == yt).all())

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise InputError("efficient_dlm lm-eval model: loglikelihood_rolling (perplexity tasks) is not "
                         "implemented; the paper's tasks are multiple choice and generation")
