"""Paper scale: ReMoE on a released MoE (arXiv 2605.27081, §4: DeepSeek-V2-Lite-Chat, and
Qwen1.5-MoE-A2.7B-Chat for EOR), loaded through transformers' own classes
(`DeepseekV2ForCausalLM`, `Qwen2MoeForCausalLM`; no remote code) with the tiny scale's objective
(`run._layer_terms` / `run._combine`, `losses.py`) on OpenHermes-2.5 conversations.

- Routers: every decoder layer whose `mlp.gate` is a top-K router (a 2-D `weight` [E, d] and
  `top_k`; DeepSeek-V2-Lite's first layer is dense and has none). A forward pre-hook runs each
  router in its weights' dtype (fp32: the routers are the trained parameters, kept as fp32
  master weights, the frozen rest in the compute dtype), and a forward hook records its
  `router_logits` and top-K indices, the `OutputRecorder` outputs of transformers' routers
  (index 0 and 2), with gradients, plus — once `RouterTap.attach_reference` froze an fp32 copy
  of the routers — the reference log-probabilities on the *current* hidden state (the trust term).
- Checkpoints are gate files: `torch.save` of {hub_id, gates: {param name: fp32 tensor}, layers,
  k, n_experts, meta}, loaded with weights_only=True. The base is the hub model's own routers;
  a fine-tune swaps its routers in (the paper's deployment: nothing else changes).
- Data: `hub.train_dataset` rows (`conversations: [{from, value}]`, from ∈ system/human/gpt) →
  chat messages → the model's chat template → at most `hub.seq_len` + 1 tokens per conversation.
- Fine-tuning: `finetune.train.batch_size` conversations per update in `hub.grad_accum`
  micro-batches (right-padded; the per-sequence terms on each row's own tokens), the gradients
  of the micro-batch losses / grad_accum summed before one clipped AdamW step (`train_accum`).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from methods.core.results import InputError, atomic_path, read_jsonl, write_jsonl

ROLES = {"system": "system", "human": "user", "gpt": "assistant"}


# ---------------------------------------------------------------------------- data ----
def messages(conv, where: str) -> list[dict]:
    """An OpenHermes-2.5 `conversations` list → chat messages [{role, content}]."""
    if not isinstance(conv, list) or not conv:
        raise InputError(f"{where}: 'conversations' must be a non-empty list of {{from, value}}, got {conv!r:.80}")
    out = []
    for turn in conv:
        if not isinstance(turn, dict) or "from" not in turn or "value" not in turn:
            raise InputError(f"{where}: a turn has no 'from'/'value' field: {turn!r:.80}")
        if turn["from"] not in ROLES:
            raise InputError(f"{where}: unknown speaker {turn['from']!r} (expected one of {sorted(ROLES)})")
        out.append({"role": ROLES[turn["from"]], "content": str(turn["value"])})
    return out


def build_data(hub, out_dir: str | Path) -> dict:
    """The first `hub.n_train` rows of the dataset's train split (fine-tuning) and the next
    `hub.n_eval` (held out: traces, PPL) as chat messages, train.jsonl / eval.jsonl."""
    from methods.core.data import dataset_splits, stream_texts

    if not hub.train_dataset:
        raise InputError("config key 'remoe.hub.train_dataset' is empty at paper scale")
    if hub.n_train < 1 or hub.n_eval < 1:
        raise InputError(f"config keys 'remoe.hub.n_train' / 'n_eval' must be >= 1, got {hub.n_train} / {hub.n_eval}")
    splits = dataset_splits(hub.train_dataset)
    if "train" not in splits:
        raise InputError(f"dataset {hub.train_dataset}: no 'train' split (has {splits})")
    need, rows = hub.n_train + hub.n_eval, []
    for conv in stream_texts(hub.train_dataset, "conversations", "train"):
        rows.append({"messages": messages(conv, f"{hub.train_dataset} row {len(rows)}")})
        if len(rows) == need:
            break
    if len(rows) < need:
        raise InputError(f"dataset {hub.train_dataset}: {len(rows)} rows < hub.n_train + hub.n_eval = {need}")
    with atomic_path(out_dir, is_dir=True) as tmp:
        write_jsonl(tmp / "train.jsonl", rows[:hub.n_train])
        write_jsonl(tmp / "eval.jsonl", rows[hub.n_train:])
    return {"train": hub.n_train, "eval": hub.n_eval, "source": hub.train_dataset}


def encode(tok, rows: list[dict], max_tokens: int) -> list[list[int]]:
    """Each conversation through the tokenizer's chat template, cut to `max_tokens`."""
    if not getattr(tok, "chat_template", None):
        raise InputError(f"tokenizer {getattr(tok, 'name_or_path', '')} has no chat template")
    out = []
    for r in rows:
        text = tok.apply_chat_template(r["messages"], tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"][:max_tokens]
        if len(ids) < 3:
            raise InputError(f"a conversation encodes to {len(ids)} tokens (< 3): {text[:80]!r}")
        out.append(ids)
    return out


def pad_batch(seqs: list[list[int]], pad_id: int) -> dict:
    """Right-padded inputs / shifted targets (−100 on padding) / attention mask / lengths."""
    S = max(len(s) for s in seqs) - 1
    x = torch.full((len(seqs), S), pad_id, dtype=torch.long)
    y = torch.full((len(seqs), S), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), S), dtype=torch.long)
    for i, s in enumerate(seqs):
        t = torch.tensor(s, dtype=torch.long)
        n = len(s) - 1
        x[i, :n], y[i, :n], mask[i, :n] = t[:-1], t[1:], 1
    return {"input_ids": x, "labels": y, "attention_mask": mask,
            "lengths": torch.tensor([len(s) - 1 for s in seqs])}


# ------------------------------------------------------------------------ routers ----
def routers(model) -> list[tuple[int, torch.nn.Module]]:
    """(layer index, router module) of every MoE layer."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise InputError(f"{type(model).__name__}: no decoder layers (model.model.layers)")
    out = []
    for i, layer in enumerate(layers):
        gate = getattr(getattr(layer, "mlp", None), "gate", None)
        w = getattr(gate, "weight", None)
        if gate is not None and hasattr(gate, "top_k") and isinstance(w, torch.nn.Parameter) and w.ndim == 2:
            out.append((i, gate))
    if not out:
        raise InputError(f"{type(model).__name__}: no MoE router (mlp.gate with a top_k and an [E, d] weight) "
                         "in any decoder layer: not a DeepSeek-V2 / Qwen2-MoE style MoE")
    return out


def gate_name(i: int) -> str:
    return f"model.layers.{i}.mlp.gate.weight"


class RouterTap:
    """Hooks on every router: fp32 router inputs, the last forward's logits and top-K indices
    per MoE layer (`record`), and the frozen reference's log-probabilities (`ref_logp`)."""

    def __init__(self, model):
        self.layers = routers(model)
        self.gates = [g for _, g in self.layers]
        self.k = int(self.gates[0].top_k)
        self.n_experts = int(self.gates[0].weight.shape[0])
        self.record = True
        self.logits: list = [None] * len(self.gates)
        self.idx: list = [None] * len(self.gates)
        self.ref_logp: list = [None] * len(self.gates)
        self.ref_weight: list | None = None
        self.handles = []
        for j, g in enumerate(self.gates):
            self.handles.append(g.register_forward_pre_hook(self._pre))
            self.handles.append(g.register_forward_hook(self._post(j)))

    @staticmethod
    def _pre(module, args):
        return (args[0].to(module.weight.dtype),) + tuple(args[1:])

    def _post(self, j):
        def hook(module, args, out):
            if not self.record:
                return
            self.logits[j], self.idx[j] = out[0], out[2]
            if self.ref_weight is not None:
                with torch.no_grad():
                    h = args[0].reshape(-1, args[0].shape[-1]).float()
                    self.ref_logp[j] = F.log_softmax(h @ self.ref_weight[j].T, -1)
        return hook

    def attach_reference(self) -> None:
        """Freeze an fp32 copy of every router as the trust-region reference."""
        self.ref_weight = [g.weight.detach().float().clone() for g in self.gates]

    def gate_only(self, model, dtype) -> list[str]:
        """Freeze everything but the routers' weights (kept in `dtype`); the trainable names."""
        model.requires_grad_(False)
        for g in self.gates:
            g.to(dtype)
            g.weight.requires_grad_(True)
        return [gate_name(i) for i, _ in self.layers]

    def state(self) -> dict:
        return {gate_name(i): g.weight.detach().float().cpu().clone() for i, g in self.layers}

    def load(self, gates: dict) -> None:
        for i, g in self.layers:
            w = gates.get(gate_name(i))
            if w is None or tuple(w.shape) != tuple(g.weight.shape):
                raise InputError(f"gate file does not match the model: {gate_name(i)} "
                                 f"{None if w is None else tuple(w.shape)} vs {tuple(g.weight.shape)}")
            with torch.no_grad():
                g.weight.copy_(w.to(g.weight.dtype))

    def close(self) -> None:
        for h in self.handles:
            h.remove()


# ------------------------------------------------------------------ checkpoints ----
def load_hub(hub_id: str, training: bool = False):
    """(model, tokenizer, tap): the hub MoE in the runtime's compute dtype, routers in the
    runtime's training dtype (fp32 master weights by default) when `training`, else fp32."""
    from methods.core.models import load_model
    from methods.core.runtime import current

    rt = current()
    model, tok = load_model(hub_id, dtype=rt.compute_dtype)
    tap = RouterTap(model)
    for g in tap.gates:
        g.to(rt.weight_dtype(True) if training else torch.float32)
    if tok.pad_token_id is None and tok.eos_token_id is None:
        raise InputError(f"tokenizer of {hub_id} has neither a pad nor an eos token")
    return model, tok, tap


def save_gates(path: str | Path, hub_id: str, tap: RouterTap, meta: dict) -> None:
    obj = {"hub_id": str(hub_id), "gates": tap.state(), "layers": [i for i, _ in tap.layers], "k": tap.k,
           "n_experts": tap.n_experts, "meta": meta}
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def read_gates(path: str | Path) -> dict:
    from methods.core.safeload import load_pt

    obj = load_pt(path, keys=())
    if "hub_id" not in obj:
        raise InputError(f"{path} is not a paper-scale gate file (no hub_id)")
    return obj


def pretrain(hub_id: str, out: str) -> dict:
    """The base: the hub model's routers as they are (checks that it is a top-K MoE)."""
    if not str(hub_id).strip():
        raise InputError("config key 'remoe.pretrain.hub_id' is empty (null pre-trains the tiny MoE)")
    model, tok, tap = load_hub(hub_id)
    if tap.k < 1 or tap.k > tap.n_experts:
        raise InputError(f"{hub_id}: router top_k {tap.k} not in [1, {tap.n_experts}]")
    save_gates(out, hub_id, tap, {"variant": "base"})
    return {"hub_id": hub_id, "moe_layers": len(tap.layers), "n_experts": tap.n_experts, "k": tap.k}


# ------------------------------------------------------------------ fine-tuning ----
def train_accum(model, micro_fn, cfg, accum: int, loss_fn, log_path=None, desc: str = "finetune") -> list[dict]:
    """core.train's update (AdamW over the trainable parameters, warm-up/constant or cosine lr,
    global-norm clipping, the same log rows), with the gradient of each update accumulated over
    `accum` micro-batches: Σ_m ∇(loss_m / accum), i.e. the gradient of the mean micro-batch loss."""
    from methods.core.runtime import current
    from methods.core.train import lr_factor, make_optimizer

    rt = current()
    opt = make_optimizer(model, cfg)
    params = [p for g in opt.param_groups for p in g["params"]]
    model.train()
    rows, t0, n_tok = [], time.perf_counter(), 0
    for step in range(cfg.steps):
        lr = cfg.lr * lr_factor(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(accum):
            batch = rt.to_device(micro_fn(step, m))
            n_tok += int((batch["labels"] != -100).sum())
            loss = loss_fn(model, batch) / accum
            loss.backward()
            total += float(loss.detach())
        gnorm = (torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip) if cfg.grad_clip > 0 else
                 torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]))
        opt.step()
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            rows.append({"step": done, "loss": total, "lr": lr, "grad_norm": float(gnorm)})
            print(f"{desc}: step {done}/{cfg.steps} loss {total:.4f}", file=sys.stderr)
    print(f"{desc}: {n_tok / (time.perf_counter() - t0):,.0f} tokens/s over {cfg.steps} updates", file=sys.stderr)
    if log_path is not None:
        write_jsonl(log_path, rows)
    model.eval()
    return rows


def finetune(cfg, base: str, data_dir: str, out: str, log: str) -> dict:
    """Gate-only fine-tune of the hub MoE named by the base gate file (one variant, one seed)."""
    from .run import _combine, _layer_terms

    hub, v = cfg.hub, cfg.variant
    if hub.grad_accum < 1 or cfg.train.batch_size % hub.grad_accum:
        raise InputError(f"config key 'remoe.hub.grad_accum': {hub.grad_accum} must be >= 1 and divide "
                         f"finetune.train.batch_size {cfg.train.batch_size}")
    if hub.seq_len < 2:
        raise InputError(f"config key 'remoe.hub.seq_len': {hub.seq_len} < 2")
    obj = read_gates(base)
    model, tok, tap = load_hub(obj["hub_id"], training=True)
    tap.load(obj["gates"])
    tap.attach_reference()
    names = tap.gate_only(model, tap.gates[0].weight.dtype)
    seqs = encode(tok, read_jsonl(Path(data_dir) / "train.jsonl"), hub.seq_len + 1)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    micro = cfg.train.batch_size // hub.grad_accum
    w = {"reuse": cfg.lambda_reuse, "smooth": cfg.lambda_smooth, "lag": cfg.lambda_lag, "ws": cfg.lambda_ws}
    t_warm = max(1.0, cfg.warm_frac * cfg.train.steps)
    K, stats = tap.k, {}

    def micro_fn(step: int, m: int) -> dict:
        # the update's rows: a function of (seed, step), as the tiny scale's _batch_fn
        g = torch.Generator().manual_seed((cfg.seed + 1) * 1_000_003 + step)
        rows = torch.randint(0, len(seqs), (cfg.train.batch_size,), generator=g)[m * micro:(m + 1) * micro]
        return {**pad_batch([seqs[int(r)] for r in rows], pad), "step": step}

    def loss_fn(model, batch):
        B, S = batch["input_ids"].shape
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        if not v.locality and v.lambda_kl == 0:
            return loss
        alpha = min(1.0, batch["step"] / t_warm)
        lengths = batch["lengths"].tolist()
        layers = []
        for j in range(len(tap.gates)):
            logp = F.log_softmax(tap.logits[j].float(), -1).reshape(B, S, -1)
            idx = tap.idx[j].reshape(B, S, K)
            ref = tap.ref_logp[j].reshape(B, S, -1)
            rows = [_layer_terms(logp[b:b + 1, :n], idx[b:b + 1, :n], ref[b:b + 1, :n], v, cfg, w)
                    for b, n in enumerate(lengths)]  # each sequence on its own tokens
            layers.append({k: torch.stack([r[k] for r in rows]).mean() for k in rows[0]})
        return _combine(loss, layers, v, alpha, stats)

    rows = train_accum(model, micro_fn, cfg.train, hub.grad_accum, loss_fn, log, f"finetune {v.name}")
    state = tap.state()
    changed = sorted(n for n in state if not torch.equal(state[n], obj["gates"][n].float()))
    save_gates(out, obj["hub_id"], tap, {"variant": v.name, "seed": cfg.seed, "trainable": names})
    return {"final_loss": rows[-1]["loss"], "last_terms": stats, "changed": changed}


# ------------------------------------------------------------------------ traces ----
def trace(cfg, ckpts: list[str], data_dir: str, out_dir: str) -> dict:
    """Per gate file: top-K sets (n_docs, L, S_max, K; −1 past each document's `lengths`),
    mean router probabilities, held-out PPL over the first `trace.n_docs` held-out
    conversations (teacher forcing; a batch of `trace.batch_size`, right-padded)."""
    rows = read_jsonl(Path(data_dir) / "eval.jsonl")
    if len(rows) < cfg.n_docs:
        raise InputError(f"config key 'trace.n_docs': {cfg.n_docs} > {len(rows)} held-out conversations")
    objs = [read_gates(p) for p in ckpts]
    hub_ids = {o["hub_id"] for o in objs}
    if len(hub_ids) != 1:
        raise InputError(f"trace: checkpoints of different models {sorted(hub_ids)}")
    from methods.core.runtime import current

    rt = current()
    model, tok, tap = load_hub(objs[0]["hub_id"])
    seqs = encode(tok, rows[:cfg.n_docs], cfg.hub.seq_len + 1)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    S_max, L, K = max(len(s) for s in seqs) - 1, len(tap.gates), tap.k
    res = {}
    for path, obj in zip(ckpts, objs):
        tap.load(obj["gates"])
        meta = obj["meta"]
        name = meta["variant"] if "seed" not in meta else f"{meta['variant']}_s{meta['seed']}"
        topk = np.full((len(seqs), L, S_max, K), -1, dtype=np.int16)
        psum, n_tok, nll = torch.zeros(L, tap.n_experts, dtype=torch.float64), 0, 0.0
        with torch.no_grad():
            for s in range(0, len(seqs), cfg.batch_size):
                b = pad_batch(seqs[s:s + cfg.batch_size], pad)
                B, S = b["input_ids"].shape
                d = rt.to_device(b)
                logits = model(input_ids=d["input_ids"], attention_mask=d["attention_mask"]).logits
                nll += float(F.cross_entropy(logits.float().flatten(0, 1), d["labels"].flatten(),
                                             ignore_index=-100, reduction="sum"))
                valid = b["attention_mask"].bool()
                n_tok += int(valid.sum())
                for j in range(L):
                    idx = tap.idx[j].reshape(B, S, K).cpu()
                    p = F.softmax(tap.logits[j].float(), -1).reshape(B, S, -1).cpu().double()
                    psum[j] += p[valid].sum(0)
                    for r, n in enumerate(b["lengths"].tolist()):
                        topk[s + r, j, :n] = idx[r, :n].numpy()
        ppl = math.exp(nll / n_tok)
        with atomic_path(Path(out_dir) / f"{name}.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, topk=topk, lengths=np.array([len(x) - 1 for x in seqs]),
                                    mean_probs=(psum / n_tok).numpy(), ppl=ppl, n_experts=tap.n_experts,
                                    layers=np.array([i for i, _ in tap.layers]))
        res[name] = ppl
    return res


# ------------------------------------------------------------------------ lm-eval ----
HEADLINE = ("exact_match,strict-match", "prompt_level_loose_acc,none", "pass@1,create_test", "acc,none",
            "exact_match,none")


def headline(row: dict) -> tuple[str, float] | None:
    """A task's headline metric: GSM8K strict-match EM, IFEval prompt-level loose accuracy,
    HumanEval pass@1, MMLU accuracy (or exact match / accuracy of a generic task)."""
    for key in HEADLINE:
        if key in row:
            return key, float(row[key])
    return None


def lm_eval(tasks: list[str], ckpts: list[str], out: str) -> dict:
    """lm-eval's `tasks` on the hub model with each checkpoint's routers swapped in (batch size
    lm-eval's "auto" on a GPU, 8 on a CPU). HumanEval executes the generated code: lm-eval's
    confirm_run_unsafe_code and HF_ALLOW_CODE_EVAL=1 are set here, as the paper ran it."""
    import os

    from methods.core.evaluate import run_lm_eval
    from methods.core.results import write_json
    from methods.core.runtime import current

    if not tasks:
        raise InputError("config key 'remoe.hub.lm_eval_tasks' is empty at paper scale")
    objs = [read_gates(p) for p in ckpts]
    model, tok, tap = load_hub(objs[0]["hub_id"])
    tap.record = False  # the hooks only keep the routers in fp32
    rt = current()
    os.environ.setdefault("HF_ALLOW_CODE_EVAL", "1")
    batch_size = "auto" if rt.is_cuda else 8
    res = {}
    for obj in objs:
        tap.load(obj["gates"])
        meta = obj["meta"]
        name = meta["variant"] if "seed" not in meta else f"{meta['variant']}_s{meta['seed']}"
        r = run_lm_eval(model, tok, tasks, None, batch_size, device=str(rt.device), confirm_run_unsafe_code=True)
        scores = {}
        for t in tasks:
            row = r["results"].get(t)
            h = headline(row) if row else None
            if h is None:
                raise InputError(f"lm-eval task {t!r}: no headline metric in {sorted(row or {})}")
            scores[t] = {"metric": h[0], "value": h[1]}
        res[name] = {"scores": scores, "results": r["results"], "lm_eval_s": r["lm_eval_s"]}
    write_json(out, res)
    return {n: {t: s["value"] for t, s in v["scores"].items()} for n, v in res.items()}
