"""The tiny LM: word-level tokenizer, pre-training on the world's three formats,
batched DPO on the preference pairs (direct format), sampling with each method through the
backend layer (HFBackend + the fixed tiny chat template), and the fitted sharpening gamma-hat
from the backend's log-prob scores."""
from __future__ import annotations

import sys

import numpy as np

from . import prompts as P
from .config import DPOConfig, PretrainConfig, SampleConfig
from .world import EOS, prompt_text, sample_doc, vocabulary


def word_tokenizer(world: dict):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", EOS, "<unk>"]
    vocab = {w: i for i, w in enumerate(specials + vocabulary(world))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token=EOS,
                                   unk_token="<unk>")


def _pad(rows: list[list[int]], pad: int):
    import torch

    w = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (w - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (w - len(r)) for r in rows])
    return ids, mask


def pretrain(world: dict, cfg: PretrainConfig, log_path=None):
    import torch

    from methods.core.models import build_model
    from methods.core.train import train

    tok = word_tokenizer(world)
    model = build_model(cfg.model, tok, cfg.seed)

    def batch_fn(step):
        rng = np.random.default_rng([cfg.seed, step])
        rows = [tok(sample_doc(world, rng))["input_ids"] for _ in range(cfg.train.batch_size)]
        ids, mask = _pad(rows, tok.pad_token_id)
        # core lm_loss wants labels already shifted: labels[t] = ids[t + 1]
        labels = torch.full_like(ids, -100)
        labels[:, :-1] = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    rows = train(model, batch_fn, cfg.train, log_path=log_path, desc="pretrain")
    return model, tok, rows


def _seq_logps(model, ids, mask, n_prompt: list[int]):
    """Sum of log-probs of the completion tokens (positions >= n_prompt) per row."""
    import torch

    logits = model(input_ids=ids, attention_mask=mask).logits
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    pos = torch.arange(1, ids.shape[1])[None, :]
    keep = (pos >= torch.tensor(n_prompt)[:, None]) & (mask[:, 1:] == 1)
    return (lp * keep).sum(1)


def dpo(model, tok, world: dict, prefs: list[dict], cfg: DPOConfig, log_path=None):
    """DPO on the direct format: chosen/rejected = winner/loser of each pair; chosen and
    rejected of a batch go through one padded forward; reference log-probs computed once."""
    import copy

    import torch

    from methods.core.train import train

    def enc(r, which):
        t = r["topic"]
        y = world["pool"][t][r[which]]
        pr = tok(prompt_text("direct", t))["input_ids"]
        return pr, tok(f"{prompt_text('direct', t)} {y} {EOS}")["input_ids"]

    pairs = []
    for r in prefs:
        w, l = ("i", "j") if r["win_i"] else ("j", "i")
        (pw, cw), (_, cl) = enc(r, w), enc(r, l)
        pairs.append((len(pw), cw, cl))
    ref = copy.deepcopy(model).eval()
    ref_lp = []
    with torch.no_grad():
        for b in range(0, len(pairs), 256):
            ch = pairs[b:b + 256]
            ids, mask = _pad([c for _, c, _ in ch] + [l for _, _, l in ch], tok.pad_token_id)
            lp = _seq_logps(ref, ids, mask, [n for n, _, _ in ch] * 2)
            ref_lp += list(zip(lp[:len(ch)].tolist(), lp[len(ch):].tolist()))
    del ref
    B = cfg.train.batch_size

    def batch_fn(step):
        idx = np.random.default_rng([cfg.train.seed, step]).choice(len(pairs), B, replace=False)
        ch = [pairs[i] for i in idx]
        ids, mask = _pad([c for _, c, _ in ch] + [l for _, _, l in ch], tok.pad_token_id)
        return {"ids": ids, "mask": mask, "n_prompt": [n for n, _, _ in ch] * 2,
                "ref": torch.tensor([ref_lp[i] for i in idx]),
                "labels": ids.masked_fill(mask == 0, -100)}  # only counted for tokens/s

    def loss_fn(m, batch):
        lp = _seq_logps(m, batch["ids"], batch["mask"], batch["n_prompt"])
        h = (lp[:B] - batch["ref"][:, 0]) - (lp[B:] - batch["ref"][:, 1])
        return -torch.nn.functional.logsigmoid(cfg.beta * h).mean()

    model.train()
    rows = train(model, batch_fn, cfg.train, loss_fn=loss_fn, log_path=log_path, desc="dpo")
    return model, rows


def tiny_backend(model, tok):
    from methods.core.llm import HFBackend

    return HFBackend.from_model(model, tok, batch_size=64, chat_format=P.tiny_chat_format)


def sample_methods(llm, world: dict, cfg: SampleConfig) -> list[dict]:
    """For every topic and method: n samples as parsed texts, through `llm.chat`."""
    rows = []
    k = world["k"]
    for mi, method in enumerate(cfg.methods):
        chats, turns = P.calls_per_prompt(method, cfg.n, k)
        if len(turns) != 1:
            raise ValueError(f"tiny sampling supports single-turn methods, not {method!r}")
        convs = [P.messages(method, f"Tell me a joke about {t}", k=k) for t in world["topics"]]
        out = llm.chat(convs, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                       top_p=cfg.top_p, n=chats, seed=cfg.seed + mi,
                       json_schema=P.json_schema(method))
        for t, replies in zip(world["topics"], out):
            texts, probs, raw = [], [], []
            for rep in replies:
                items = P.parse_verbalized(rep) if method in P.LIST_METHODS else \
                    [{"text": P.parse_single(method, rep), "probability": None}]
                items = items[:turns[0]]
                texts += [it["text"] for it in items]
                probs += [it["probability"] for it in items]
                raw.append(rep)
            rows.append({"topic": t, "method": method, "samples": texts[:cfg.n],
                         "probabilities": probs[:cfg.n], "raw": raw})
    return rows


def pool_logprobs(llm, world: dict) -> dict:
    """log pi_model(y | direct prompt) of every pool item (sum of token log-probs incl. eos),
    from the backend's `score`."""
    prompts, conts, keys = [], [], []
    for t in world["topics"]:
        for y in world["pool"][t]:
            prompts.append(prompt_text("direct", t))
            conts.append(f" {y} {EOS}")
            keys.append(t)
    scores = llm.score(prompts, conts)
    out: dict = {t: [] for t in world["topics"]}
    for t, s in zip(keys, scores):
        out[t].append(float(sum(s)))
    return out


def fitted_gamma(lp_aligned: dict, lp_base: dict, world: dict) -> float:
    """Pooled slope of log pi_aligned on log pi_base (each renormalised over the pool, topic
    fixed effects, r_true as a covariate) = gamma-hat of pi_aligned ∝ pi_base^gamma."""
    X, Y = [], []
    for ti, t in enumerate(world["topics"]):
        a, b = np.asarray(lp_aligned[t]), np.asarray(lp_base[t])
        a, b = a - np.logaddexp.reduce(a), b - np.logaddexp.reduce(b)
        for yi in range(len(a)):
            fe = [0.0] * len(world["topics"])
            fe[ti] = 1.0
            X.append(fe + [b[yi], world["r_true"][t][yi]])
            Y.append(a[yi])
    coef, *_ = np.linalg.lstsq(np.asarray(X), np.asarray(Y), rcond=None)
    return float(coef[len(world["topics"])])


def log(msg: str) -> None:
    print(msg, file=sys.stderr)
