"""Steps that train and measure: the LM runs (train, then evaluate), the 1-layer composition runs
(D2, step 4) and the side-by-side step-time measurement (D3's latency, reported only)."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from methods.core.models import save_trained
from methods.core.results import InputError, dumps as strict_dumps
from methods.core.runtime import current
from methods.core.train import TrainConfig, train
from methods.dag_moe.config import ArchConfig, ComposeSection, DownstreamSection, LMSection, MoEConfig, TimingConfig

from . import data as D
from .model import DagMoEForCausalLM, build, dag_moe_config, flops_per_token, moe_loss, param_counts


@dataclass
class LMConfig(LMSection):
    """The `lm` section plus the MoE knobs every architecture shares (the workflow merges them)."""
    moe: MoEConfig


@dataclass
class ComposeConfig(ComposeSection):
    """The `compose` section plus the shared MoE knobs."""
    moe: MoEConfig


@dataclass
class DownstreamConfig(DownstreamSection):
    """The `downstream` section; lm-eval's batch size and document limit are fixed here."""
    batch_size: int = 16
    limit: int | None = None


# ------------------------------------------------------------------------ probes ----
@torch.no_grad()
def answer_metrics(model, world: D.World, prompts, answers, batch_size: int) -> dict:
    """Accuracy (argmax = answer) and mean CE at the answer position, over every prompt."""
    if not prompts:
        return {"acc": float("nan"), "loss": float("nan"), "n": 0}
    rt = current()  # the model sits on the runtime's device (train() put it there)
    correct, total_loss = 0, 0.0
    for i in range(0, len(prompts), batch_size):
        b = rt.to_device(D.answer_batch(world, prompts[i:i + batch_size], answers[i:i + batch_size]))
        logits = model(input_ids=b["input_ids"]).logits[:, -1].float()
        tgt = b["labels"][:, -1]
        total_loss += float(F.cross_entropy(logits, tgt, reduction="sum"))
        correct += int((logits.argmax(-1) == tgt).sum())
    return {"acc": correct / len(prompts), "loss": total_loss / len(prompts), "n": len(prompts)}


@torch.no_grad()
def routing_stats(model: DagMoEForCausalLM, batches: list[dict]) -> dict:
    """Per layer: expert load CV (std/mean of tokens per expert, population std) and, for
    DAG layers, the mean of every edge A[j,k] (j<k) over tokens."""
    c = model.config
    L, E, K = c.num_hidden_layers, c.n_experts, c.moe_k
    counts = torch.zeros(L, E, dtype=torch.float64)
    edge_sum = torch.zeros(L, K, K, dtype=torch.float64)
    n_tok, rt = 0, current()
    for b in batches:
        model(input_ids=rt.to_device(b["input_ids"]))
        for layer, r in enumerate(model.routing()):  # tallied on the CPU, wherever the model runs
            counts[layer] += torch.bincount(r["topk_idx"].reshape(-1), minlength=E).double().cpu()
            if r["edges"] is not None:
                edge_sum[layer] += r["edges"].double().sum(0).cpu()
        n_tok += b["input_ids"].numel()
    cv = (counts.std(dim=1, unbiased=False) / counts.mean(dim=1)).tolist()
    out = {"load_cv": cv, "load_cv_mean": sum(cv) / L}
    if c.aggregation == "dag":
        mean = edge_sum / n_tok
        rows, cols = torch.triu_indices(K, K, offset=1)
        out["edge_mean"] = [float(mean[i, rows, cols].mean()) for i in range(L)]  # all edges
        out["edge_a12"] = [float(mean[i, 0, 1]) for i in range(L)]                # first → second
        out["edges"] = {f"{int(j) + 1}{int(k) + 1}": [float(mean[i, j, k]) for i in range(L)]
                        for j, k in zip(rows, cols)}
    return out


def lm_eval(model, world: D.World, batches: list[dict], eval_bs: int, generated: bool) -> dict:
    from methods.core.train import evaluate_loss

    model.eval()
    val = evaluate_loss(model, batches)
    out = {"val_loss": val, "val_ppl": math.exp(val), **routing_stats(model, batches)}
    if generated:  # the C1/C2 probes only exist on the generated corpus
        for split in ("train", "heldout"):
            m = answer_metrics(model, world, *D.c1_eval_set(world, split), eval_bs)
            key = "c1" if split == "train" else "c1_heldout"
            out.update({f"{key}_acc": m["acc"], f"{key}_loss": m["loss"], f"{key}_n": m["n"]})
        m = answer_metrics(model, world, *D.c2_eval_set(world), eval_bs)
        out.update(c2_em=m["acc"], c2_loss=m["loss"], c2_n=m["n"])
    return out


def arch_summary(cfg) -> dict:
    return {"params": param_counts(cfg), "flops_per_token": flops_per_token(cfg, cfg.max_position_embeddings)}


# --------------------------------------------------------------------- LM runs ----
def _lm_batches(world: D.World, shards_dir: str | Path | None, cfg: LMConfig, seed: int):
    """(batch_fn, val batches) for the generated mixture or, at paper scale, a hub corpus read
    from the shards step's output (train/, val/) by (seed, step)."""
    if world.cfg.source == D.GENERATED:
        mix = D.MixtureBatches(world)
        return (lambda step: mix.batch(step, cfg.train.batch_size, seed),
                mix.val_batches(cfg.eval_batch_size))
    from methods.core.shards import ShardedTokenStream

    if shards_dir is None:
        raise InputError(f"corpus {world.cfg.source!r} is read from token shards: pass --shards")
    seq = world.cfg.seq_len
    train_s = ShardedTokenStream(Path(shards_dir) / "train", seq)
    val_s = ShardedTokenStream(Path(shards_dir) / "val", seq)
    return (lambda step: train_s.batch(step, cfg.train.batch_size, seed),
            val_s.sequential_batches(cfg.eval_batch_size, -(-world.cfg.n_val_rows // cfg.eval_batch_size)))


def train_lm(cfg: LMConfig, arch: ArchConfig, arch_name: str, seed: int, data_dir: str | Path,
             out_dir: str | Path, ckpt: str | Path | None = None, shards_dir: str | Path | None = None) -> dict:
    from methods.core.tokenizer import load_tokenizer

    data_dir = Path(data_dir)
    world = D.load_world(data_dir)
    tok = load_tokenizer(data_dir / "tokenizer")
    mcfg = dag_moe_config(cfg.model, arch, cfg.moe, len(tok), tok.pad_token_id, tok.eos_token_id)
    model = build(mcfg, seed)
    batch_fn, val = _lm_batches(world, shards_dir, cfg, seed)
    generated = world.cfg.source == D.GENERATED
    tcfg = TrainConfig(**{**asdict(cfg.train), "seed": seed})
    t0 = time.perf_counter()
    rows = train(model, batch_fn, tcfg, loss_fn=moe_loss, ckpt_path=ckpt, desc=f"{arch_name}_s{seed}",
                 identity={"lm": asdict(cfg), "arch": asdict(arch), "shards": shards_dir is not None},
                 eval_fn=lambda: {"val_loss": lm_eval_loss(model, val)})
    wall = time.perf_counter() - t0
    metrics = {"arch": arch_name, "seed": seed, **asdict(arch),
               **lm_eval(model, world, val, cfg.eval_batch_size, generated),
               **arch_summary(mcfg), "train_wall_s": wall,
               "train_step_ms": 1000 * wall / tcfg.steps,  # includes eval and batch generation
               "val_curve": [[r["step"], r["val_loss"]] for r in rows if "val_loss" in r],
               "train_loss_final": next(r["loss"] for r in reversed(rows) if "loss" in r)}
    save_trained(model, tok, out_dir, extra_files={
        "train_log.jsonl": "".join(strict_dumps(r, sort_keys=True) + "\n" for r in rows)})
    return metrics


def lm_eval_loss(model, batches) -> float:
    from methods.core.train import evaluate_loss

    return evaluate_loss(model, batches)


# ------------------------------------------------------------ D2 compose runs ----
def train_compose(cfg: ComposeConfig, aggregation: str, data_dir: str | Path) -> dict:
    """The 1-layer composition task for every seed of `cfg.seeds` in this process."""
    # the task is always the generated C1 world (its permutations and word vocabulary), also
    # at paper scale, where the LM corpus is a hub one: D2 is a one-layer diagnostic
    world = D.load_world(data_dir)
    tok = D.word_tokenizer(world.cfg)
    arch = ArchConfig(cfg.n_experts, cfg.k, cfg.d_ff, aggregation)
    mcfg = dag_moe_config(cfg.model, arch, cfg.moe, len(tok), tok.pad_token_id, tok.eos_token_id)
    comp = D.ComposeBatches(world)
    prompts, answers = D.c1_eval_set(world, "all")  # in-distribution: every (f, g, x)
    runs = []
    for seed in cfg.seeds:
        model = build(mcfg, seed)
        tcfg = TrainConfig(**{**asdict(cfg.train), "seed": seed})
        t0 = time.perf_counter()
        train(model, lambda step, s=seed: comp.batch(step, tcfg.batch_size, s), tcfg,
              loss_fn=moe_loss, desc=f"compose1L_{aggregation}_s{seed}")
        wall = time.perf_counter() - t0
        m = answer_metrics(model, world, prompts, answers, 512)
        # routing over the answer-position inputs of every prompt
        r = routing_stats(model, [D.answer_batch(world, prompts, answers)])
        runs.append({"seed": seed, "acc": m["acc"], "loss": m["loss"], "n": m["n"],
                     "step_ms": 1000 * wall / tcfg.steps, **r})
    return {"aggregation": aggregation, **asdict(arch), "runs": runs, **arch_summary(mcfg)}


# --------------------------------------------------------------- step timing ----
def time_steps(models: dict, batch: dict, warmup: int, reps: int) -> dict:
    """Median wall time of one training step (forward + backward + AdamW step, aux loss on) per
    model, the models interleaved in one process (the order rotates every repetition) so that
    machine load hits all of them alike. Returns ms per step and ratios are left to callers.
    The models sit on the runtime's device; the step runs as `train` runs it (autocast to the
    compute dtype), and on a GPU the clock waits for the device (kernels are asynchronous)."""
    rt = current()
    batch = rt.to_device(batch)
    sync = torch.cuda.synchronize if rt.is_cuda else (lambda: None)
    names = list(models)
    opts = {n: torch.optim.AdamW(models[n].parameters(), lr=1e-4) for n in names}
    times = {n: [] for n in names}
    for rep in range(warmup + reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for n in order:
            model = models[n]
            model.train()
            sync()
            t0 = time.perf_counter()
            with rt.autocast():
                loss = moe_loss(model, batch)
            opts[n].zero_grad(set_to_none=True)
            loss.backward()
            opts[n].step()
            sync()
            dt = time.perf_counter() - t0
            if rep >= warmup:
                times[n].append(dt)
    return {n: {"median_ms": 1000 * statistics.median(t), "min_ms": 1000 * min(t), "reps": len(t)}
            for n, t in times.items()}


def time_archs(run_dirs: dict, world_dir: str | Path, cfg: TimingConfig, seq_len: int) -> dict:
    """Step times of trained models (their learned routing) on one fixed mixture batch."""
    from methods.core.models import load_model

    world = D.load_world(world_dir)
    models = {}
    for name, d in run_dirs.items():  # placed for training: fp32 master weights, as train() keeps them
        models[name], _ = load_model(d, training=True)
    if world.cfg.source == D.GENERATED:
        batch = D.MixtureBatches(world).batch(0, cfg.batch_size, seed=0, salt=4)
    else:  # any fixed token batch times the same arithmetic
        g = torch.Generator().manual_seed(0)
        v = next(iter(models.values())).config.vocab_size
        ids = torch.randint(0, v, (cfg.batch_size, seq_len + 1), generator=g)
        batch = {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}
    return time_steps(models, batch, cfg.warmup, cfg.reps)

