"""Greedy decoding of every system FusionRoute is compared with: one expert, the merged expert,
the router alone, expert-only token routing, and FusionRoute (router + chosen expert logits)."""
from __future__ import annotations

from . import data as D
from .experts import expert_logits


def make_step(system: str, router, experts, expert: int | None = None, model=None):
    import torch

    from .fusion import last, next_token

    def step(ids, lens):
        mask = (torch.arange(ids.shape[1], device=ids.device)[None] < lens[:, None]).long()
        with torch.no_grad():
            if system in ("expert", "merged"):
                m = model if system == "merged" else experts[expert]
                return last(m(input_ids=ids, attention_mask=mask, use_cache=False).logits, lens).argmax(-1)
            r, w = router(ids, mask)
            r, w = last(r, lens), last(w, lens)
            E = last(expert_logits(experts, ids, mask).permute(1, 2, 0, 3), lens) if system != "router" else None
            return next_token(system, r, E, w)

    return step


def decode(step, tok, prompts: list[str], max_new: int, batch_size: int) -> list[str]:
    from .fusion import greedy

    stop = tok.convert_tokens_to_ids(D.STOP)
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    outs = greedy(step, ids, max_new, stop, tok.pad_token_id, batch_size)
    return [tok.decode(o) for o in outs]
