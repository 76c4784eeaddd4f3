"""FusionRoute's second phase: preference pairs from the SFT system's own outputs, then
complemented DPO of the router LM on the fused log-probs (routing head frozen)."""
from __future__ import annotations

import random
import time
from pathlib import Path

from methods.core.results import read_jsonl, write_jsonl

from . import data as D
from .config import CDPOConfig, EvalConfig, Hub, is_paper
from .decode import decode, make_step
from .experts import expert_logits, load_experts
from .router import load_router, save_router


def cdpo(cfg: CDPOConfig, ev: EvalConfig, data_dir, expert_dirs, router_dir, out, prefs_out, hub: Hub) -> dict:
    import copy

    import torch

    from methods.core.data import PromptAnswerBatches
    from methods.core.train import train

    from .fusion import dpo_loss, fused_seq_logp

    if is_paper(hub, "cdpo"):
        return cdpo_hub(cfg, expert_dirs, router_dir, out, prefs_out, hub)
    experts = load_experts(expert_dirs)
    router, tok = load_router(router_dir)
    items = D.mixture(read_jsonl(Path(data_dir) / "train.jsonl"), D.router_weights(), cfg.n_prefs, cfg.seed)
    outs = decode(make_step("fusionroute", router, experts), tok, [t["prompt"] for t in items],
                  ev.max_new_tokens, ev.batch_size)
    rng = random.Random(cfg.seed)
    prefs = []
    for t, o in zip(items, outs):
        wrong = o != t["answer"]
        rej = (o if o.endswith(D.STOP) else o + D.STOP) if wrong else D.corrupt(rng, t["answer"])
        if rej == t["answer"]:
            rej = D.corrupt(rng, t["answer"])
        prefs.append({"domain": t["domain"], "prompt": t["prompt"], "chosen": t["answer"],
                      "rejected": rej, "rejected_is_model_output": wrong})
    write_jsonl(prefs_out, prefs)
    # fixed terms: the chosen expert's logits at every position (routing head of the SFT router)
    # and the reference (SFT) fused sequence log-probs
    pb_w = PromptAnswerBatches([(p["prompt"], p["chosen"]) for p in prefs], tok)
    pb_l = PromptAnswerBatches([(p["prompt"], p["rejected"]) for p in prefs], tok)

    def fixed(pb):
        b = pb.collate(list(range(len(prefs))))
        with torch.no_grad():
            r, w = router(b["input_ids"], b["attention_mask"])
            E = expert_logits(experts, b["input_ids"], b["attention_mask"])       # [n,B,T,V]
            ch = w.argmax(-1)                                                      # [B,T]
            Ec = E.permute(1, 2, 0, 3).gather(2, ch[..., None, None].expand(-1, -1, 1, E.shape[-1]))[:, :, 0]
            ref = fused_seq_logp(r, Ec, b["labels"])
        return b, Ec, ref

    bw, Ew, refw = fixed(pb_w)
    bl, El, refl = fixed(pb_l)
    policy = copy.deepcopy(router.lm).train()          # W (the routing head) stays frozen
    n = len(prefs)

    def pad_to(x, T, value):
        return torch.nn.functional.pad(x, (0, T - x.shape[1]), value=value)

    def batch_fn(step):
        g = torch.Generator().manual_seed(cfg.seed * 100003 + step)
        idx = torch.randint(0, n, (cfg.train.batch_size,), generator=g)
        T = max(bw["input_ids"].shape[1], bl["input_ids"].shape[1])
        cat = {k: torch.cat([pad_to(bw[k][idx], T, v), pad_to(bl[k][idx], T, v)])
               for k, v in (("input_ids", tok.pad_token_id), ("attention_mask", 0), ("labels", -100))}
        Ecat = torch.cat([torch.nn.functional.pad(Ew[idx], (0, 0, 0, T - Ew.shape[1])),
                          torch.nn.functional.pad(El[idx], (0, 0, 0, T - El.shape[1]))])
        return {**cat, "E": Ecat, "ref": torch.cat([refw[idx], refl[idx]])}

    def loss_fn(model, b):
        r = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
        lp = fused_seq_logp(r, b["E"], b["labels"])
        k = lp.shape[0] // 2
        return dpo_loss(lp[:k], lp[k:], b["ref"][:k], b["ref"][k:], cfg.beta)

    t0 = time.perf_counter()
    rows = train(policy, batch_fn, cfg.train, loss_fn=loss_fn, desc="cdpo")
    router.lm = policy.eval()
    info = {"train_s": time.perf_counter() - t0, "log": rows, "n_prefs": n,
            "frac_rejected_model_output": sum(p["rejected_is_model_output"] for p in prefs) / n}
    save_router(router, tok, out, info)
    return info


# ---- paper scale -------------------------------------------------------------------------------
def cdpo_hub(cfg: CDPOConfig, expert_dirs, router_dir, out, prefs_out, hub: Hub) -> dict:
    """The CDPO phase on hub models with the same loss as the tiny scale (fusion.fused_seq_logp +
    dpo_loss): the routing head of the SFT router picks the expert at every position, the SFT
    router with the same experts is the reference, W stays frozen and the router LM is trained.
    The pairs are the hub preference dataset's (role prefs: chosen / rejected replies), not
    decoded by the SFT system; the fixed terms are computed per batch (an [n, B, T, V] tensor
    of the whole set does not fit at V = 128k)."""
    import copy

    import torch

    from methods.core.results import InputError
    from methods.core.train import train

    from .experts import check_shared_vocab, load_hub_experts, stop_ids
    from .fusion import dpo_loss, fused_seq_logp
    from .router import chat_batches

    experts, named = load_hub_experts(expert_dirs)
    router, tok = load_router(router_dir)
    check_shared_vocab([(f"router ({router_dir})", tok, router.lm)] + named)
    sources = [d for d in hub.datasets if d.role == "prefs"]
    if not sources:
        raise InputError("fusionroute.hub.datasets names no preference dataset (role prefs) for CDPO")
    prefs = []
    for i, ds in enumerate(sources):
        n = cfg.n_prefs // len(sources) + (i < cfg.n_prefs % len(sources))
        prefs += [{"source": ds.id, **p, "rejected_is_model_output": False} for p in D.pref_pairs(ds, n, cfg.seed)]
    prefs = [p for p in prefs if p["chosen"] != p["rejected"]]
    if not prefs:
        raise InputError("cdpo: every preference pair has chosen == rejected")
    eos = tok.eos_token or tok.convert_ids_to_tokens(stop_ids(tok, router.lm)[0])
    pb_w = chat_batches([(p["prompt"], p["chosen"]) for p in prefs], tok, eos, cfg.max_len, "cdpo")
    pb_l = chat_batches([(p["prompt"], p["rejected"]) for p in prefs], tok, eos, cfg.max_len, "cdpo")
    if len(pb_w.items) != len(pb_l.items):
        raise InputError(f"cdpo: max_len {cfg.max_len} drops the chosen but not the rejected reply of some pair")
    write_jsonl(prefs_out, prefs)
    for p in router.parameters():
        p.requires_grad_(False)
    policy = copy.deepcopy(router.lm).train()          # W (the routing head) stays frozen
    for p in policy.parameters():
        p.requires_grad_(True)
    n = len(pb_w.items)

    def pad_to(x, T, value):
        return torch.nn.functional.pad(x, (0, T - x.shape[1]), value=value)

    def batch_fn(step):
        g = torch.Generator().manual_seed(cfg.seed * 100003 + step)
        idx = torch.randint(0, n, (cfg.train.batch_size,), generator=g).tolist()
        bw, bl = pb_w.collate(idx), pb_l.collate(idx)
        T = max(bw["input_ids"].shape[1], bl["input_ids"].shape[1])
        return {k: torch.cat([pad_to(bw[k], T, v), pad_to(bl[k], T, v)])
                for k, v in (("input_ids", pb_w.pad_id), ("attention_mask", 0), ("labels", -100))}

    def loss_fn(model, b):
        with torch.no_grad():                          # the fixed terms: SFT routing and reference
            r0, w = router(b["input_ids"], b["attention_mask"])
            E = expert_logits(experts, b["input_ids"], b["attention_mask"])       # [n,B,T,V]
            ch = w.argmax(-1)                                                      # [B,T]
            Ec = E.permute(1, 2, 0, 3).gather(2, ch[..., None, None].expand(-1, -1, 1, E.shape[-1]))[:, :, 0]
            ref = fused_seq_logp(r0, Ec, b["labels"])
        r = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
        lp = fused_seq_logp(r, Ec, b["labels"])
        k = lp.shape[0] // 2
        return dpo_loss(lp[:k], lp[k:], ref[:k], ref[k:], cfg.beta)

    t0 = time.perf_counter()
    rows = train(policy, batch_fn, cfg.train, loss_fn=loss_fn, desc="cdpo")
    router.lm = policy.eval()
    info = {"train_s": time.perf_counter() - t0, "log": rows, "n_prefs": n, "sources": [d.id for d in sources],
            "frac_rejected_model_output": 0.0}
    save_router(router, tok, out, info)
    return info
