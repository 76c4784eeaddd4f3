"""FusionRoute's router: a small LM plus a linear routing head w_t = W h_t, saved beside the HF
weights, and its SFT phase (next-token loss + routing loss on informative positions)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from methods.core.results import atomic_path, read_jsonl

from . import data as D
from .config import Hub, RouterConfig, is_paper, tiny_block
from .experts import expert_logits, load_experts

HEAD_FILE = "route_head.safetensors"


def router_module(lm, n: int):
    import torch

    class Router(torch.nn.Module):
        """The router LM plus its linear routing head w_t = W h_t."""

        def __init__(self):
            super().__init__()
            self.lm = lm
            self.head = torch.nn.Linear(lm.config.hidden_size, n, bias=False)
            torch.nn.init.normal_(self.head.weight, std=0.02)

        def forward(self, ids, mask=None):
            out = self.lm(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
            return out.logits, self.head(out.hidden_states[-1])

    return Router()


def save_router(router, tok, out, info: dict) -> None:
    from safetensors.torch import save_file

    with atomic_path(out, is_dir=True) as tmp:
        router.lm.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        save_file({"weight": router.head.weight.detach().contiguous()}, str(tmp / HEAD_FILE))
        (tmp / "router.json").write_text(json.dumps(info, indent=1))


def load_router(path):
    from methods.core.models import load_model
    from methods.core.safeload import load_safetensors

    lm, tok = load_model(path)
    w = load_safetensors(Path(path) / HEAD_FILE, keys=("weight",))["weight"]
    r = router_module(lm, w.shape[0])
    r.head.weight.data.copy_(w)
    r.head.to(device=lm.device, dtype=lm.dtype)     # beside the LM (a no-op on CPU in fp32)
    return r.eval(), tok


def sft_router(cfg: RouterConfig, seed: int, data_dir, expert_dirs, out, hub: Hub) -> dict:
    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model
    from methods.core.train import train

    from .fusion import sft_loss

    if is_paper(hub, "sft"):
        return sft_router_hub(cfg, seed, data_dir, expert_dirs, out, hub)
    tok = D.load_tok(data_dir)
    experts = load_experts(expert_dirs)
    items = D.mixture(read_jsonl(Path(data_dir) / "train.jsonl"), D.router_weights(), cfg.n_train, seed)
    batches = PromptAnswerBatches(D.prompt_answer_pairs(items), tok)
    router = router_module(build_model(tiny_block(cfg.model, "router.model"), tok, cfg.init_seed), len(experts))
    parts = []

    def loss_fn(model, batch):
        E = expert_logits(experts, batch["input_ids"], batch["attention_mask"])
        r, w = model(batch["input_ids"], batch["attention_mask"])
        total, lm, rt = sft_loss(r, w, E, batch["labels"], cfg.lambda_route, cfg.informative_only)
        parts.append((lm.item(), rt.item()))
        return total

    t0 = time.perf_counter()
    rows = train(router, lambda s: batches.batch(s, cfg.train.batch_size, seed), cfg.train,
                 loss_fn=loss_fn, desc="router_sft")
    k = max(1, len(parts) // 10)
    info = {"seed": seed, "train_s": time.perf_counter() - t0, "log": rows,
            "final_lm_loss": sum(p[0] for p in parts[-k:]) / k,
            "final_route_loss": sum(p[1] for p in parts[-k:]) / k,
            "n_params": sum(p.numel() for p in router.parameters())}
    save_router(router, tok, out, info)
    return info


# ---- paper scale -------------------------------------------------------------------------------
def chat_batches(pairs: list[tuple[str, str]], tok, eos: str, max_len: int | None, what: str):
    """PromptAnswerBatches of (user prompt, reply) pairs in the router base's chat template, the
    reply closed by `eos`, each sequence cut to `max_len` tokens (pairs whose prompt alone fills
    it are dropped; at least one remains or a one-line error)."""
    from methods.core.data import PromptAnswerBatches
    from methods.core.results import InputError

    from .experts import chat_prompt

    b = PromptAnswerBatches([(chat_prompt(tok, p), a) for p, a in pairs], tok, end=eos)
    if max_len is not None:
        b.items = [(ids[:max_len], start) for ids, start in b.items if start < max_len]
        if not b.items:
            raise InputError(f"{what}: every prompt is longer than max_len {max_len} tokens")
    return b


def hub_router_and_experts(router_path, expert_dirs, training: bool):
    """(router LM, tokenizer, experts) at paper scale, after the shared-vocabulary check."""
    from methods.core.models import load_model

    from .experts import check_shared_vocab, load_hub_experts

    experts, named = load_hub_experts(expert_dirs)
    lm, tok = load_model(router_path, training=training)
    check_shared_vocab([(f"router ({router_path})", tok, lm)] + named)
    return lm, tok, experts


def sft_router_hub(cfg: RouterConfig, seed: int, data_dir, expert_dirs, out, hub: Hub) -> dict:
    """The SFT phase on hub models: the router base (hub.router_base) with a fresh routing head,
    the hub experts frozen, the SFT mixture of the hub datasets (data step) in the router's chat
    template; the same loss as the tiny scale (fusion.sft_loss: L_lm + λ·L_route on informative
    positions)."""
    import torch

    from methods.core.results import InputError
    from methods.core.train import train

    from .experts import stop_ids
    from .fusion import sft_loss

    lm, tok, experts = hub_router_and_experts(hub.router_base, expert_dirs, training=True)
    train_items = read_jsonl(Path(data_dir) / "train.jsonl")
    present = sorted({t["domain"] for t in train_items})
    if not present:
        raise InputError(f"{data_dir}/train.jsonl has no SFT records")
    items = D.mixture(train_items, {d: 1 / len(present) for d in present}, cfg.n_train, seed)
    eos = tok.convert_ids_to_tokens(stop_ids(tok, lm)[0]) if tok.eos_token is None else tok.eos_token
    batches = chat_batches(D.prompt_answer_pairs(items), tok, eos, cfg.max_len, "sft")
    torch.manual_seed(cfg.init_seed)
    router = router_module(lm, len(experts))
    parts = []

    def loss_fn(model, batch):
        E = expert_logits(experts, batch["input_ids"], batch["attention_mask"])
        r, w = model(batch["input_ids"], batch["attention_mask"])
        total, lm_, rt = sft_loss(r, w, E, batch["labels"], cfg.lambda_route, cfg.informative_only)
        parts.append((lm_.item(), rt.item()))
        return total

    t0 = time.perf_counter()
    rows = train(router, lambda s: batches.batch(s, cfg.train.batch_size, seed), cfg.train,
                 loss_fn=loss_fn, desc="router_sft")
    k = max(1, len(parts) // 10)
    info = {"seed": seed, "router_base": hub.router_base, "experts": hub.experts, "train_s": time.perf_counter() - t0,
            "log": rows, "n_sequences": len(batches.items), "domains": present,
            "final_lm_loss": sum(p[0] for p in parts[-k:]) / k,
            "final_route_loss": sum(p[1] for p in parts[-k:]) / k,
            "n_params": sum(p.numel() for p in router.parameters())}
    save_router(router, tok, out, info)
    return info
