"""DAG steps that run the model (RaBitQCache, arXiv 2606.31519): capture decode-time q/K/V, sparse evaluation with
generation running through `SparseAttention`, and (paper scale) lm-eval tasks with it.

Decoding protocol: the prompt minus its last `tail_steps` tokens is prefilled densely; those
tokens (the end of the filler and the query "value of key X ?") are fed one per decode step,
then the answer is generated, so every answer digit and the prompt's tail are predicted by
decode steps that go through the sparse path (with a full prefill the first digit would come
from dense prefill attention). Next-token agreement and KL to dense cover all those steps.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from methods.core.results import InputError, read_jsonl

from .attention import SparseAttention, aggregate
from .config import CaptureConfig, LmEvalConfig as LmEvalSection, SparseConfig, SparseEvalConfig as SparseEvalSection


@dataclass
class SparseEvalConfig(SparseEvalSection):
    """The `sparse` section plus the shared `method` settings (the workflow merges them in)."""
    method: SparseConfig


@dataclass
class LmEvalConfig(LmEvalSection):
    """The `lm_eval` section plus the shared `method` settings (the workflow merges them in); the
    section's `top_p` replaces the method's."""
    method: SparseConfig
    include_path: str | None = None   # a folder of task YAMLs instead of lm-eval's registry (tests)


def _prompts(data: str | Path, tokenizer, n: int, batch_size: int):
    """Batches of (ids [B, L], answer ids [B, n_digits]) of equal-length prompts."""
    recs = read_jsonl(Path(data) / "eval.jsonl")[:n]
    if not recs:
        raise InputError(f"no evaluation prompts in {data}")
    # the prompt with the tokenizer's own specials (Llama-3: <|begin_of_text|>, as the model is
    # always run; the word-level tiny tokenizer adds none), the answer without
    enc = [(tokenizer(r["prompt"])["input_ids"],
            tokenizer(r["answer"], add_special_tokens=False)["input_ids"]) for r in recs]
    batches, i = [], 0
    while i < len(enc):  # consecutive prompts of equal token length share a batch (no padding)
        j = i + 1
        while j < len(enc) and j - i < batch_size and len(enc[j][0]) == len(enc[i][0]) \
                and len(enc[j][1]) == len(enc[i][1]):
            j += 1
        batches.append((torch.tensor([e[0] for e in enc[i:j]]), torch.tensor([e[1] for e in enc[i:j]])))
        i = j
    return batches


@torch.no_grad()
def prefill(model, ids, n_tail: int = 1):
    """Dense prefill of the prompt without its last `n_tail` tokens; returns the cache."""
    return model(input_ids=ids[:, :-n_tail], use_cache=True).past_key_values


@torch.no_grad()
def decode(model, ctl: SparseAttention, cache, inputs, n_gen: int):
    """Decode steps from the cache: the tokens `inputs` [B, T] are fed one per step (teacher
    forcing), then the model's own greedy tokens until `n_gen` tokens have been generated after
    the last input. Returns the greedy prediction of every step [B, T + n_gen − 1] (the last
    n_gen are the generation) and the logits [B, T + n_gen − 1, V]."""
    preds, out = [], []
    for t in range(inputs.shape[1] + n_gen - 1):
        ctl.step = t
        tok = inputs[:, t:t + 1] if t < inputs.shape[1] else preds[-1]
        logits = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1].float()
        preds.append(logits.argmax(-1, keepdim=True))
        out.append(logits)
    return torch.cat(preds, 1), torch.stack(out, 1)


def capture(cfg: CaptureConfig, model_dir, data_dir, method: SparseConfig) -> dict:
    """Per layer: q [P, S, H, D], K/V [P, H, L, D] (post-RoPE, GQA-repeated), dense decode
    probabilities [P, S, H, L] (zero beyond each step's length), the prefill centroids, and
    `length` [P], each prompt's number of keys. Prompts of different token lengths (a hub
    tokenizer on the word-level passkey texts) run in separate batches; K, V and the
    probabilities are zero-padded to the longest along L, and `length` marks the valid keys."""
    from methods.core.models import load_model

    model, tok = load_model(model_dir)
    ctl = SparseAttention(model, dataclasses.replace(method, method="dense", skip_layers=0), capture=True)
    ctl.capture_layers = None if cfg.layers is None else set(cfg.layers)
    per_layer: dict[int, dict[str, list]] = {}
    for ids, _ in _prompts(data_dir, tok, cfg.n_prompts, cfg.batch_size):
        ctl.captured = {}
        decode(model, ctl, prefill(model, ids), ids[:, -1:], cfg.n_steps)
        for layer, c in ctl.captured.items():
            d = per_layer.setdefault(layer, {"q": [], "k": [], "v": [], "probs": [], "c_q": [], "c_k": [],
                                             "length": []})
            lk = c["k"].shape[2]
            d["q"].append(torch.stack(c["q"], 1))
            d["probs"].append(torch.stack([torch.nn.functional.pad(p, (0, lk - p.shape[-1])) for p in c["probs"]], 1))
            d["length"].append(torch.full((c["k"].shape[0],), lk, dtype=torch.int64))
            for key in ("k", "v", "c_q", "c_k"):
                d[key].append(c[key])
    out = {}
    for layer, d in per_layer.items():
        lmax = max(k.shape[2] for k in d["k"])
        for key in ("k", "v"):     # [B, H, L, D]: pad L
            d[key] = [torch.nn.functional.pad(t, (0, 0, 0, lmax - t.shape[2])) for t in d[key]]
        d["probs"] = [torch.nn.functional.pad(t, (0, lmax - t.shape[-1])) for t in d["probs"]]
        out[layer] = {k: torch.cat(v) for k, v in d.items()}
    return out


def save_capture(cap: dict, path) -> None:
    import numpy as np

    from methods.core.results import atomic_path

    arrays = {f"l{layer}_{k}": v.numpy() for layer, d in cap.items() for k, v in d.items()}
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def load_capture(path) -> dict:
    from methods.core.safeload import load_npz

    cap: dict[int, dict] = {}
    for name, arr in load_npz(path).items():
        layer, sep, key = name[1:].partition("_")
        if not (name.startswith("l") and layer.isdigit() and sep):
            raise InputError(f"capture file {path}: array {name!r} is not named 'l<layer>_<key>'")
        cap.setdefault(int(layer), {})[key] = torch.from_numpy(arr)
    return cap


def _variants(cfg: SparseEvalConfig) -> list[tuple[str, SparseConfig]]:
    """The Top-p runs, in the order they run (the fixed-budget baselines follow per batch)."""
    m = cfg.method
    runs = [("dense", dataclasses.replace(m, method="dense"))]
    for p in cfg.top_ps:
        runs.append((f"rabitq_p{p:g}", dataclasses.replace(m, method="rabitq", top_p=p)))
        runs.append((f"int4key_p{p:g}", dataclasses.replace(m, method="int4key", top_p=p)))
    runs.append((f"rabitq_fpq_p{cfg.ref_p:g}", dataclasses.replace(m, method="rabitq", top_p=cfg.ref_p, query_bits=0)))
    runs.append((f"rabitq_nocenter_p{cfg.ref_p:g}", dataclasses.replace(m, method="rabitq", top_p=cfg.ref_p, center=False)))
    return runs


def _decode_from_prefill(model, ctl, ids, n_tail, cache, snap, inputs, n_gen, record):
    """Decode one method (ctl.cfg) from the batch's shared prefill: restore the layer states,
    crop the cache back to the prefill (transformers 5: a negative count removes tokens). The
    no-centre ablation prefills afresh instead, so its calibration has zero centroids."""
    ctl.records, ctl.record = [], record
    if not ctl.cfg.center:
        return decode(model, ctl, prefill(model, ids, n_tail), inputs, n_gen)
    ctl.restore(snap)
    extra = cache.get_seq_length() - (ids.shape[1] - n_tail)
    if extra > 0:
        cache.crop(-extra)
    return decode(model, ctl, cache, inputs, n_gen)


def sparse_eval(cfg: SparseEvalConfig, model_dir, data_dir) -> dict:
    """Every method over the evaluation prompts. Per batch the prefill runs once (calibration,
    encoded keys and KV cache are the same for every method) and each method decodes from a
    restored copy, twice: free-running (its own greedy tokens: passkey EM) and teacher-forced
    on dense attention's tokens (same inputs for every method: recall, budget, output error,
    I/O, and next-token top-1 agreement and KL(p_dense ‖ p_method)). The fixed-budget
    baselines (oracle top-k, Quest, random) get, per batch, the mean budget RaBitQ had at each p."""
    from methods.core.models import load_model

    model, tok = load_model(model_dir)
    ctl = SparseAttention(model, dataclasses.replace(cfg.method, method="rabitq"), record=True)
    recs: dict[str, list] = {}
    stats: dict[str, dict[str, list]] = {}
    n_tail = cfg.tail_steps
    for ids, ans in _prompts(data_dir, tok, cfg.n_prompts, cfg.batch_size):
        ctl.cfg = dataclasses.replace(cfg.method, method="rabitq")
        cache = prefill(model, ids, n_tail)
        snap = ctl.snapshot()
        tail, n_ans = ids[:, -n_tail:], ans.shape[1]
        runs = list(_variants(cfg))
        ref = None
        done = 0
        while done < len(runs):
            name, mcfg = runs[done]
            done += 1
            ctl.cfg = mcfg
            args = (model, ctl, ids, n_tail, cache, snap)
            if ref is None:  # dense runs first: its tokens and logits are the reference
                preds, logits = _decode_from_prefill(*args, tail, n_ans, True)
                ref, ref_logits, forced_preds = preds, logits, preds
            else:
                preds, _ = _decode_from_prefill(*args, tail, n_ans, False)
                # teacher-forced on dense's generated tokens: every method sees the same inputs
                forced_preds, logits = _decode_from_prefill(*args, torch.cat([tail, ref[:, n_tail - 1:-1]], 1), 1,
                                                            True)
            gen = preds[:, n_tail - 1:]
            recs.setdefault(name, []).extend(ctl.records)
            lp, lq = torch.log_softmax(ref_logits, -1), torch.log_softmax(logits, -1)
            st = stats.setdefault(name, {"em": [], "agree": [], "kl": [], "agree_prompt": []})
            st["em"].append((gen == ans).all(1).float())
            st["agree"].append((forced_preds == ref).float().flatten())
            st["agree_prompt"].append((forced_preds == ref).float().mean(1))
            st["kl"].append((lp.exp() * (lp - lq)).sum(-1).flatten())
            if name.startswith("rabitq_p"):
                p = name[len("rabitq_p"):]
                frac = aggregate(ctl.records)["budget"]
                for base in ("oracle", "quest", "random"):
                    runs.append((f"{base}_at_p{p}", dataclasses.replace(cfg.method, method=base, budget=frac)))
    out = {}
    for name in recs:
        st = {k: torch.cat(v) for k, v in stats[name].items()}
        out[name] = {**aggregate(recs[name]), "em": float(st["em"].mean()), "n_prompts": int(st["em"].numel()),
                     "top1_agree": float(st["agree"].mean()), "kl": float(st["kl"].mean()),
                     # per prompt, in prompt order (the claims' intervals resample prompts)
                     "em_per_prompt": st["em"].tolist(), "agree_per_prompt": st["agree_prompt"].tolist()}
    return {"methods": out, "order": list(out)}


def lm_eval_sparse(cfg: LmEvalConfig, model_dir) -> dict:
    """lm-eval tasks (LongBench / RULER at paper scale) with generation through the sparse
    attention (prefill dense, decode sparse, as in the paper); the recall / budget / I/O of
    every sparse decode step is aggregated beside lm-eval's results."""
    from methods.core.evaluate import run_lm_eval
    from methods.core.models import load_model

    # device and dtype (bf16 on a GPU) come from the runtime spec, as for every model load
    model, tok = load_model(model_dir)
    ctl = SparseAttention(model, dataclasses.replace(cfg.method, top_p=cfg.top_p), record=True)
    # RULER generates its prompts at load time, sized in tokens by the tokenizer its metadata
    # names (`tokenizer`/`pretrained`); a model passed in memory names none, so give the model's
    metadata = {"tokenizer": str(Path(model_dir).resolve()), **(cfg.metadata or {})}
    res = run_lm_eval(model, tok, cfg.tasks, cfg.include_path, batch_size=cfg.batch_size,
                      limit=cfg.limit, metadata=metadata)
    return {**res, "sparse_steps": aggregate(ctl.records)}
