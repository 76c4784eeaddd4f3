"""FusionRoute's DAG steps: experts, router SFT, preference data + CDPO, evaluation."""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from methods.core.config import from_json
from methods.core.models import ModelConfig
from methods.core.results import InputError, atomic_path, read_json, read_jsonl, write_jsonl
from methods.core.train import TrainConfig

from . import data as D

HEAD_FILE = "route_head.safetensors"


@dataclass
class Hub:
    router_base: str | None = None
    experts: dict = field(default_factory=dict)        # domain → hub id (paper scale), null below
    datasets: list = field(default_factory=list)
    lm_eval_tasks: list = field(default_factory=list)


@dataclass
class ExpertConfig:
    model: ModelConfig
    train: TrainConfig
    n_train: int = 6000
    init_seed: int = 0            # one init for every expert (a shared base: merging is meaningful)


@dataclass
class RouterConfig:
    model: ModelConfig
    train: TrainConfig
    lambda_route: float = 1.0
    informative_only: bool = True
    n_train: int = 8000
    init_seed: int = 1


@dataclass
class CDPOConfig:
    train: TrainConfig
    n_prefs: int = 400
    beta: float = 0.1
    seed: int = 2


@dataclass
class EvalConfig:
    max_new_tokens: int = 10
    batch_size: int = 512
    cost_ctx_len: int = 16
    cost_batch: int = 8
    cost_repeats: int = 5


def hub_cfg(cfg_json: str) -> Hub:
    return from_json(Hub, cfg_json, "hub")


def _paper_guard(hub: Hub, step: str) -> None:
    if hub.router_base or any(hub.experts.values()):
        raise InputError(f"{step}: paper scale (hub router {hub.router_base!r}) needs the GPU "
                         "implementation of FusionRoute training, which this tiny-scale module does not have")


def _tok(data_dir):
    from methods.core.tokenizer import load_tokenizer
    return load_tokenizer(Path(data_dir) / "tokenizer")


def _pairs(items):
    return [(t["prompt"], t["answer"]) for t in items]


# ---- experts ---------------------------------------------------------------------------------
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
    tok = _tok(data_dir)
    train_items = read_jsonl(Path(data_dir) / "train.jsonl")
    items = D.mixture(train_items, D.expert_weights(home, hub_frac(data_dir)), cfg.n_train, seed)
    batches = PromptAnswerBatches(_pairs(items), tok)
    model = build_model(cfg.model, tok, cfg.init_seed)
    t0 = time.perf_counter()
    rows = train(model, lambda s: batches.batch(s, cfg.train.batch_size, seed), cfg.train,
                 desc=f"expert_{home}")
    info = {"domain": home, "hub": None, "seed": seed, "train_s": time.perf_counter() - t0,
            "final_loss": rows[-1]["loss"], "n_params": sum(p.numel() for p in model.parameters()),
            "log": rows}
    save_model(model, tok, out, {"expert.json": json.dumps(info, indent=1)})
    return info


def hub_frac(data_dir) -> float:
    return read_json(Path(data_dir) / "data_config.json")["home_frac"]


def load_experts(dirs: list[str]):
    from methods.core.models import load_model

    models = []
    for d in dirs:
        info = read_json(Path(d) / "expert.json")
        models.append(load_model(info.get("hub") or d)[0].eval())
    return models


# ---- router ----------------------------------------------------------------------------------
def _router_module(lm, n: int):
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
    from safetensors.torch import load_file

    from methods.core.models import load_model

    lm, tok = load_model(path)
    w = load_file(str(Path(path) / HEAD_FILE))["weight"]
    r = _router_module(lm, w.shape[0])
    r.head.weight.data.copy_(w)
    return r.eval(), tok


def expert_logits(experts, ids, mask):
    import torch

    with torch.no_grad():
        return torch.stack([e(input_ids=ids, attention_mask=mask, use_cache=False).logits for e in experts])


def sft_router(cfg: RouterConfig, seed: int, data_dir, expert_dirs, out, hub: Hub) -> dict:
    from methods.core.data import PromptAnswerBatches
    from methods.core.models import build_model
    from methods.core.train import train

    from .fusion import sft_loss

    _paper_guard(hub, "sft")
    tok = _tok(data_dir)
    experts = load_experts(expert_dirs)
    items = D.mixture(read_jsonl(Path(data_dir) / "train.jsonl"), D.router_weights(), cfg.n_train, seed)
    batches = PromptAnswerBatches(_pairs(items), tok)
    router = _router_module(build_model(cfg.model, tok, cfg.init_seed), len(experts))
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


# ---- decoding systems ------------------------------------------------------------------------
def make_step(system: str, router, experts, expert: int | None = None, model=None):
    import torch

    from .fusion import last, next_token

    def step(ids, lens):
        mask = (torch.arange(ids.shape[1])[None] < lens[:, None]).long()
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


# ---- CDPO ------------------------------------------------------------------------------------
def cdpo(cfg: CDPOConfig, ev: EvalConfig, data_dir, expert_dirs, router_dir, out, prefs_out, hub: Hub) -> dict:
    import copy

    import torch

    from methods.core.data import PromptAnswerBatches
    from methods.core.train import train

    from .fusion import dpo_loss, fused_seq_logp

    _paper_guard(hub, "cdpo")
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


# ---- evaluation ------------------------------------------------------------------------------
def merge(experts):
    """Uniform weight average of the experts (same architecture, same init)."""
    import copy

    m = copy.deepcopy(experts[0])
    sd = {k: sum(e.state_dict()[k] for e in experts) / len(experts) for k in m.state_dict()}
    m.load_state_dict(sd)
    return m.eval()


def costs(models: dict, ev: EvalConfig) -> dict:
    from methods.model_pool.pool import analytic_forward_flops, arch, counted_forward_flops, wall_per_token

    n = ev.cost_ctx_len
    out = {}
    for name, m in models.items():
        a = arch(m)
        ana, cnt = analytic_forward_flops(a, n) / n, counted_forward_flops(m, n) / n
        out[name] = {**a, "flops_per_token_analytic": ana, "flops_per_token_counted": cnt,
                     "flops_rel_err": abs(ana - cnt) / cnt,
                     "wall_s_per_token": wall_per_token(m, n, ev.cost_batch, ev.cost_repeats)}
    return out


def evaluate(ev: EvalConfig, data_dir, expert_dirs, sft_dir, cdpo_dir, out, hub: Hub) -> dict:
    _paper_guard(hub, "evaluate")
    experts = load_experts(expert_dirs)
    sft, tok = load_router(sft_dir)
    fin, _ = load_router(cdpo_dir)
    merged = merge(experts)
    test = read_jsonl(Path(data_dir) / "test.jsonl")
    prompts = [t["prompt"] for t in test]
    systems = {f"expert_{k}": make_step("expert", sft, experts, expert=i) for i, k in enumerate(D.EXPERT_DOMAINS)}
    systems.update({"merged": make_step("merged", sft, experts, model=merged),
                    "router_alone": make_step("router", sft, experts),
                    "expert_only_routing": make_step("expert_only", sft, experts),
                    "fusionroute_sft": make_step("fusionroute", sft, experts),
                    "fusionroute": make_step("fusionroute", fin, experts)})
    em, timing, samples = {}, {}, {}
    for name, step in systems.items():
        t0 = time.perf_counter()
        outs = decode(step, tok, prompts, ev.max_new_tokens, ev.batch_size)
        dt = time.perf_counter() - t0
        ntok = sum(len(o) for o in outs)     # char tokenizer: one token per character
        timing[name] = {"decode_s": dt, "tokens": ntok, "s_per_token": dt / max(ntok, 1)}
        em[name] = {d: 100.0 * sum(o == t["answer"] for o, t in zip(outs, test) if t["domain"] == d)
                    / max(1, sum(t["domain"] == d for t in test)) for d in D.DOMAINS}
        em[name]["macro"] = sum(em[name][d] for d in D.DOMAINS) / len(D.DOMAINS)
        samples[name] = [{"prompt": t["prompt"], "gold": t["answer"], "out": o} for t, o in list(zip(test, outs))[::25]]
        print(f"{name}: {em[name]}", file=sys.stderr)
    # sequence-level routing with an oracle domain label (comp: the best expert, an upper bound)
    seq = {d: em[f"expert_{d}"][d] for d in D.EXPERT_DOMAINS}
    seq["comp"] = max(em[f"expert_{d}"]["comp"] for d in D.EXPERT_DOMAINS)
    seq["macro"] = sum(seq[d] for d in D.DOMAINS) / len(D.DOMAINS)
    em["seq_level_oracle"] = seq
    cost = costs({"expert": experts[0], "router": sft.lm}, ev)
    cost["fusionroute_flops_per_token"] = (cost["router"]["flops_per_token_counted"]
                                           + cost["expert"]["flops_per_token_counted"])
    return {"em": em, "timing": timing, "costs": cost, "samples": samples}


def claim_metrics(res: dict) -> dict:
    em = res["em"]
    fr, eo = em["fusionroute"], em["expert_only_routing"]
    best_single = max(em[f"expert_{d}"]["macro"] for d in D.EXPERT_DOMAINS)
    m = {
        "c1_margin_vs_best_expert": fr["macro"] - best_single,
        "c1_margin_vs_expert_only": fr["macro"] - eo["macro"],
        "c2_min_home_gap": min(fr[d] - em[f"expert_{d}"][d] for d in D.EXPERT_DOMAINS),
        "c3_comp_gain": fr["comp"] - eo["comp"],
        "c4_add_gain_vs_router": fr["add"] - em["router_alone"]["add"],
        "c5_cdpo_minus_sft": fr["macro"] - em["fusionroute_sft"]["macro"],
        "fusionroute_macro_em": fr["macro"],
        "best_single_expert_macro_em": best_single,
        "merged_macro_em": em["merged"]["macro"],
        "seq_level_oracle_macro_em": em["seq_level_oracle"]["macro"],
    }
    return m


def plot(res: dict, path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    from methods.core.plots import figure, save

    em = res["em"]
    names = list(em)
    cols = list(D.DOMAINS) + ["macro"]
    fig, ax = figure(figsize=(11, 4))
    x = np.arange(len(cols))
    wdt = 0.8 / len(names)
    for i, n in enumerate(names):
        ax.bar(x + i * wdt - 0.4 + wdt / 2, [em[n][c] for c in cols], wdt, label=n,
               color=plt.get_cmap("tab10")(i % 10))
    ax.set_xticks(x, cols)
    ax.set_ylabel("exact match (%)")
    ax.legend(fontsize=7, ncol=2)
    save(fig, path, "Exact match (greedy, stop at ';') per domain and macro-average for each single "
         "expert, the uniform weight-merged expert, the router alone, expert-only token routing, "
         "sequence-level routing with an oracle domain label, FusionRoute after SFT and after CDPO. "
         "comp (reverse of a sum) is held out from every expert.")


def table(res: dict) -> str:
    cols = list(D.DOMAINS) + ["macro"]
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for n, row in res["em"].items():
        lines.append(f"| {n} | " + " | ".join(f"{row[c]:.1f}" for c in cols) + " |")
    return "\n".join(lines) + "\n"


def config_json(cfg) -> dict:
    return asdict(cfg)
