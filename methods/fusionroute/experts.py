"""FusionRoute's domain experts: training one (or pointing at its hub id at paper scale), loading
them, and their stacked next-token logits."""
from __future__ import annotations

import json
import time
from pathlib import Path

from methods.core.results import InputError, atomic_path, read_json, read_jsonl

from . import data as D
from .config import ExpertConfig, Hub, tiny_block


def train_expert(cfg: ExpertConfig, home: str, seed: int, data_dir, out, hub: Hub) -> dict:
    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model, save_model
    from methods.core.train import train

    if home not in D.EXPERT_DOMAINS:
        raise InputError(f"unknown expert domain {home!r} (one of {D.EXPERT_DOMAINS})")
    if any(hub.experts.values()):
        info = {"domain": home, "hub": hub.experts[home]}
        with atomic_path(out, is_dir=True) as tmp:
            (tmp / "expert.json").write_text(json.dumps(info, indent=1))
        return info
    for key in ("model", "train", "n_train", "init_seed"):
        tiny_block(getattr(cfg, key), f"expert.{key}")
    tok = D.load_tok(data_dir)
    train_items = read_jsonl(Path(data_dir) / "train.jsonl")
    items = D.mixture(train_items, D.expert_weights(home, D.saved_home_frac(data_dir)), cfg.n_train, seed)
    batches = PromptAnswerBatches(D.prompt_answer_pairs(items), tok)
    model = build_model(cfg.model, tok, cfg.init_seed)
    t0 = time.perf_counter()
    rows = train(model, lambda s: batches.batch(s, cfg.train.batch_size, seed), cfg.train,
                 desc=f"expert_{home}")
    info = {"domain": home, "hub": None, "seed": seed, "train_s": time.perf_counter() - t0,
            "final_loss": rows[-1]["loss"], "n_params": sum(p.numel() for p in model.parameters()),
            "log": rows}
    save_model(model, tok, out, {"expert.json": json.dumps(info, indent=1)})
    return info


def load_experts(dirs: list[str]):
    from methods.core.models import load_model

    models = []
    for d in dirs:
        info = read_json(Path(d) / "expert.json")
        models.append(load_model(info.get("hub") or d)[0].eval())
    return models


def expert_logits(experts, ids, mask):
    import torch

    with torch.no_grad():
        return torch.stack([e(input_ids=ids, attention_mask=mask, use_cache=False).logits for e in experts])


# ---- paper scale: hub experts and the shared vocabulary ------------------------------------------
def base_vocab(tok) -> dict:
    """token -> id of a tokenizer's regular vocabulary (its added/special tokens left out: Llama-3
    and Llama-3.1 name some reserved special tokens differently, which fusion never emits)."""
    added = tok.get_added_vocab()
    return {t: i for t, i in tok.get_vocab().items() if t not in added}


def check_shared_vocab(named: list[tuple[str, object, object]]) -> None:
    """Token-level fusion adds the router's and an expert's logits index by index: every
    (name, tokenizer, model) must map the same tokens to the same ids and emit logits of the
    same width as the first (the router), else a one-line error naming the pair."""
    name0, tok0, m0 = named[0]
    v0, width0 = base_vocab(tok0), m0.get_output_embeddings().weight.shape[0]
    for name, tok, m in named[1:]:
        v = base_vocab(tok)
        if v != v0:
            diff = len(set(v.items()) ^ set(v0.items()))
            raise InputError(f"{name} does not share the tokenizer vocabulary of {name0} ({len(v)} vs {len(v0)} "
                             f"regular tokens, {diff} (token, id) pairs differ): token-level fusion needs one vocabulary")
        width = m.get_output_embeddings().weight.shape[0]
        if width != width0:
            raise InputError(f"{name} emits {width} logits per position, {name0} {width0}: token-level fusion "
                             "needs one vocabulary")


def load_hub_experts(dirs: list[str]) -> tuple[list, list[tuple[str, object, object]]]:
    """Paper scale: the experts the pointer directories name (hub ids), and (name, tokenizer,
    model) of each for the vocabulary check."""
    from methods.core.models import load_model

    models, named = [], []
    for d in dirs:
        info = read_json(Path(d) / "expert.json")
        if not info.get("hub"):
            raise InputError(f"{d}: not a hub expert pointer (expert.json has no hub id)")
        m, tok = load_model(info["hub"])
        models.append(m.eval())
        named.append((f"expert {info.get('domain')} ({info['hub']})", tok, m))
    return models, named


def chat_prompt(tok, prompt: str) -> str:
    """A user turn in the router base's chat template, ready for the assistant's reply (the
    text every model of the collaboration reads: one token sequence for all)."""
    if not getattr(tok, "chat_template", None):
        raise InputError("the router base's tokenizer has no chat template (paper scale formats every "
                         "prompt as a user turn)")
    return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)


def stop_ids(tok, model) -> list[int]:
    """The ids that end a reply: the tokenizer's eos and the model's generation eos ids."""
    ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids |= set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    if not ids:
        raise InputError("the router base has no eos token: a reply could not end")
    return sorted(ids)
