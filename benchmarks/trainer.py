"""Throughput and MFU of our trainer (`methods.core.train.train`) beside HF `transformers.Trainer`.

    python benchmarks/trainer.py [--steps 100] [--repeats 3] [--model-size tiny|small] [--threads 1]

Both sides train the same model (`build_model(cfg, tok, seed)`, so the same init) on the same
batches (`TokenStream.batch(step, B, seed)`), with the same AdamW (our `make_optimizer`: same
lr, betas, eps, decay/no-decay grouping), the same schedule (our `lr_factor`: linear warm-up,
cosine to `min_lr_ratio`), the same gradient clipping and the same next-token loss, on
`--threads` CPU threads. Each run is W warm-up steps (not timed) + S timed steps + 1 closing
step. A repeat runs both sides once; R repeats; medians over repeats and the median over repeats
of the per-repeat ratio ours/HF are reported.

Interleaving. `--interleave step` (default): the two trainers run in two threads that take turns
one step at a time (ours step k, HF step k, ours step k+1, ...; the waiting one sleeps on a
condition variable), so on a shared machine both see the same load at the ~50-ms scale of a
step; the ratio is then stable to a few % even when other jobs come and go. `--interleave run`:
ours then HF, one whole run after the other (ours, HF, ours, HF, ...). Both models are built in
the main thread before either trainer starts (`build_model` seeds torch's global RNG).

Timing. A "step" is everything from the start of one update to the start of the next (batch
fetch/creation, forward, backward, clipping, optimizer, schedule, the trainer's bookkeeping).
Ours: a stamp when `train()` calls `batch_fn(step)`; HF: a `TrainerCallback.on_step_begin` stamp
(HF fetches a step's batch just before it), so the boundary k → k+1 spans exactly one full step
on both sides; steps W..W+S-1 are summed; setup (model build, Trainer construction) and the
first W steps are excluded. Two clocks: wall (`perf_counter`) and CPU (`process_time`, CPU
seconds of this process's threads -- other jobs holding the core do not count, so at
`--threads 1` it estimates what an unshared core would do). tokens/s = S·B·T / time;
"med.step" = B·T / median wall time of one step (drops stalls).

FLOPs (PaLM appendix B / nanoGPT `estimate_mfu`, fwd+bwd, no activation recomputation):

    N      = L·(2·d·d + 2·d·d_kv + 3·d·d_ff) + V·d
             (matmul weights only: q,o; k,v (d_kv = n_kv_heads·d/n_heads); SwiGLU gate, up,
              down; plus the LM-head matmul V·d -- counted even though it is tied to the
              embedding, whose lookup is not a matmul; RMSNorm gains are not matmuls and are
              left out)
    F_tok  = 6·N + 12·L·T·d
             (6 = 2 FLOPs per multiply-add × (1 forward + 2 backward) matmuls per weight;
              12·L·T·d = attention scores QKᵀ and weighted sum AV, 2·T·d FLOPs per token each
              in the forward, ×3 for fwd+bwd, counted over the full T×T square as PaLM and
              nanoGPT do, although a causal kernel may skip half)
    F_step = F_tok · B · T

achieved FLOP/s = F_step·S / time;  MFU = achieved FLOP/s / peak on the same clock, where the
peak is this machine's measured fp32 `torch.mm` rate on `--threads` threads for a large square
matmul (best of 8 reps, n = 1024 and 2048, best size; measured before the runs and again after
each repeat, best of all, since on a shared machine the quietest moment is the peak). The
script also times every matmul the model does at its own shapes (each linear layer's forward
x·Wᵀ, input gradient dY·W and weight gradient dYᵀ·x at M = B·T rows; batched matmuls of the
attention shapes) and reports the "shape ceiling": matmul FLOPs of a step / Σ(count × best
time) -- the rate a step would reach if it were nothing but these matmuls at these sizes.

Correctness is checked beside the speed: the loss of the last step (same batch, same weights if
all went the same), the loss of the final weights on fixed held-out batches, and the largest
absolute difference between the two final models' parameters. `--aa-control` runs our trainer
on both sides: its ratio is the harness's own bias and noise.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TQDM_DISABLE", "1")  # our train() draws no bar; HF runs with disable_tqdm
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

# model sizes: tiny = the wd_plasticity tiny-scale model (config/scales/tiny.yaml)
SIZES = {
    "tiny": {"model": {"d_model": 64, "n_layers": 3, "n_heads": 4, "d_ff": 172},
             "steps": 100, "warmup": 10},
    "small": {"model": {"d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 688},
              "steps": 20, "warmup": 3},
}


# ------------------------------------------------------------------------ setup ----
def make_text(n_chars: int, seed: int) -> str:
    """Generated corpus: PCFG sentences and arithmetic lines, one per line."""
    from methods.core.data import arithmetic_line, pcfg_sentence

    rng = random.Random(seed)
    lines, n = [], 0
    while n < n_chars:
        line = pcfg_sentence(rng) if rng.random() < 0.6 else arithmetic_line(rng)
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines) + "\n"


def flops_per_token(mcfg, vocab: int, seq_len: int) -> dict:
    d, L, T = mcfg.d_model, mcfg.n_layers, seq_len
    d_kv = (mcfg.n_kv_heads or mcfg.n_heads) * (d // mcfg.n_heads)
    n_layer = L * (2 * d * d + 2 * d * d_kv + 3 * d * mcfg.d_ff)
    n_head = vocab * d
    n = n_layer + n_head
    attn = 12 * L * T * d
    return {"N_matmul": n, "N_layers": n_layer, "N_lm_head": n_head,
            "flops_6N": 6 * n, "flops_attention": attn, "flops_per_token": 6 * n + attn}


# ---------------------------------------------------------------- matmul peak ----
CLOCKS = ("wall", "cpu")  # time.perf_counter, time.process_time (CPU seconds of all our threads)


def _best_time(fn, reps: int, min_time: float) -> dict:
    """Best per-call seconds over `reps` trials on each clock; each trial loops until ≥ min_time.
    On a shared machine the wall clock also counts time other jobs held the core; the process
    CPU clock does not (it still sees their cache and memory-bandwidth pressure)."""
    fn()
    t0 = time.perf_counter()
    fn()
    inner = max(1, int(min_time / max(time.perf_counter() - t0, 1e-7)))
    best = {c: float("inf") for c in CLOCKS}
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        w1, c1 = time.perf_counter(), time.process_time()
        best["wall"] = min(best["wall"], (w1 - w0) / inner)
        best["cpu"] = min(best["cpu"], max(c1 - c0, 1e-9) / inner)
    return best


def square_peak(sizes=(1024, 2048), reps: int = 8) -> dict:
    """fp32 GFLOP/s of C = A·B for square n×n, per clock; the peak is the best over sizes."""
    import torch

    out = {}
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        c = torch.empty(n, n)
        t = _best_time(lambda: torch.mm(a, b, out=c), reps, min_time=0.0)
        out[str(n)] = {clock: 2 * n ** 3 / t[clock] / 1e9 for clock in CLOCKS}
    return {"by_size": out, **{clock: max(v[clock] for v in out.values()) for clock in CLOCKS}}


def model_shape_matmuls(mcfg, vocab: int, batch: int, seq_len: int, reps: int = 10) -> dict:
    """Time every matmul of one training step at the model's own shapes (fp32, torch.mm/bmm)."""
    import torch

    d, L, T, M = mcfg.d_model, mcfg.n_layers, seq_len, batch * seq_len
    H = mcfg.n_heads
    hd = d // H
    d_kv = (mcfg.n_kv_heads or H) * hd
    # (name, in, out, count per step) for each linear layer kind
    linears = [("attn q,o", d, d, 2 * L), ("attn k,v", d, d_kv, 2 * L),
               ("mlp gate,up", d, mcfg.d_ff, 2 * L), ("mlp down", mcfg.d_ff, d, L),
               ("lm_head", d, vocab, 1)]
    cache, rows = {}, []
    total_flops, total_time = 0.0, {c: 0.0 for c in CLOCKS}

    def add(layer, op, shape, count, fl, t):
        nonlocal total_flops
        rows.append({"layer": layer, "op": op, "shape": shape, "count": count,
                     **{f"gflops_{c}": fl / t[c] / 1e9 for c in CLOCKS}})
        total_flops += fl * count
        for c in CLOCKS:
            total_time[c] += t[c] * count

    for name, fin, fout, count in linears:
        x, w, dy = torch.randn(M, fin), torch.randn(fout, fin), torch.randn(M, fout)
        for kind, a, b in (("fwd x·Wᵀ", x, w.t()), ("bwd dY·W", dy, w), ("bwd dYᵀ·x", dy.t(), x)):
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
            key = (m, k, n, a.stride(), b.stride())
            if key not in cache:
                cache[key] = _best_time(lambda: torch.mm(a, b), reps, min_time=0.02)
            add(name, kind, f"({m}×{k})@({k}×{n})", count, 2 * m * k * n, cache[key])
    # attention: S = Q·Kᵀ and O = P·V in the forward; dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q
    # (the SDPA CPU kernel fuses these; batched matmuls of the same shapes stand in for them)
    q, k_, p = torch.randn(batch * H, T, hd), torch.randn(batch * H, hd, T), torch.randn(batch * H, T, T)
    v = torch.randn(batch * H, T, hd)
    for kind, a, b, n_per in (("QKᵀ, dO·Vᵀ", q, k_, 2), ("P·V, Pᵀ·dO, dS·K, dSᵀ·Q", p, v, 4)):
        t = _best_time(lambda: torch.bmm(a, b), reps, min_time=0.02)
        add("attention", kind, f"{a.shape[0]}×({a.shape[1]}×{a.shape[2]})@({b.shape[1]}×{b.shape[2]})",
            n_per * L, 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2], t)
    return {"rows": rows, "step_matmul_flops": total_flops, "step_matmul_seconds": total_time,
            **{c: total_flops / total_time[c] / 1e9 for c in CLOCKS}}


# ------------------------------------------------------------------------ runs ----
class Setup:
    def __init__(self, args):
        import torch

        from methods.core.data import TokenStream
        from methods.core.models import ModelConfig
        from methods.core.tokenizer import train_tokenizer
        from methods.core.train import TrainConfig

        size = SIZES[args.model_size]
        self.S = args.steps if args.steps is not None else size["steps"]
        self.W = args.warmup if args.warmup is not None else size["warmup"]
        self.B, self.T, self.seed = args.batch_size, args.seq_len, args.seed
        text = make_text(args.corpus_chars, seed=1234)
        val = make_text(args.corpus_chars // 10, seed=4321)
        self.tok = train_tokenizer([text], kind="char")
        self.stream = TokenStream.from_text(text, self.tok, self.T)
        self.eval_batches = TokenStream.from_text(val, self.tok, self.T).sequential_batches(self.B, 4)
        self.mcfg = ModelConfig(**size["model"], max_seq_len=self.T)
        total = self.W + self.S + 1
        # the wd_plasticity tiny pretraining recipe, with the warm-up = the untimed steps
        self.tcfg = TrainConfig(steps=total, batch_size=self.B, lr=3e-3, optimizer="adamw",
                                betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, decay_min_ndim=2,
                                warmup_steps=self.W, schedule="cosine", min_lr_ratio=0.1,
                                grad_clip=1.0, eval_every=0, ckpt_every=0, log_every=total,
                                seed=self.seed)
        self.total = total
        # the HF side reads the very windows our batch_fn draws: batch s = rows [s·B, (s+1)·B)
        self.windows = torch.cat([torch.cat([b["input_ids"], b["labels"][:, -1:]], dim=1)
                                  for b in (self.stream.batch(s, self.B, self.seed) for s in range(total))])
        self.vocab = len(self.tok)
        self.tokens_timed = self.S * self.B * self.T


OTHER = {"ours": "hf", "hf": "ours"}


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


class Solo:
    """Step boundaries of a run that has the process to itself."""

    def boundary(self, side: str):
        t = _now()
        return t, t  # (end of the previous step, start of this one)

    def finish(self, side: str) -> None:
        pass


class Lockstep:
    """Two trainers in two threads take turns one step at a time (ours step k, HF step k, ours
    step k+1, ...), so both see the same machine load at a ~step time scale. Only the thread
    holding the turn computes; the other waits on a condition variable (no CPU, no GIL)."""

    def __init__(self):
        self.cv = threading.Condition()
        self.turn, self.done = "ours", set()

    def boundary(self, side: str):
        end = _now()
        with self.cv:
            self.turn = OTHER[side]
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.turn == side or OTHER[side] in self.done)
        return end, _now()

    def finish(self, side: str) -> None:
        with self.cv:
            self.done.add(side)
            self.turn = OTHER[side]
            self.cv.notify_all()


def _timings(bounds: list, W: int, S: int) -> dict:
    """Wall and process-CPU seconds of steps W..W+S-1; bounds[k] = (end of step k-1, start of step k)."""
    steps = [(bounds[k + 1][0][0] - bounds[k][1][0], bounds[k + 1][0][1] - bounds[k][1][1]) for k in range(W, W + S)]
    return {"seconds": sum(w for w, _ in steps), "cpu_seconds": sum(c for _, c in steps),
            "step_seconds": [w for w, _ in steps]}


def run_ours(su: Setup, gate, model, side: str = "ours") -> dict:
    import torch

    from methods.core.train import train

    bounds: list = []

    def batch_fn(step: int) -> dict:
        bounds.append(gate.boundary(side))
        return su.stream.batch(step, su.B, su.seed)

    rows = train(model, batch_fn, su.tcfg, desc="ours")
    return {**_timings(bounds, su.W, su.S), "final_train_loss": rows[-1]["loss"],
            "threads": torch.get_num_threads(), "_model": model}


def run_hf(su: Setup, gate, model, labels_mode: str) -> dict:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from methods.core.train import lr_factor, make_optimizer

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return len(su.windows)

        def __getitem__(self, i):
            w = su.windows[i]
            if labels_mode == "shift":
                # T positions, targets given pre-shifted: exactly our inputs and targets
                return {"input_ids": w[:-1], "labels": w[:-1], "shift_labels": w[1:]}
            # the plain HF convention: labels = input_ids over the T+1 window, shifted inside the
            # loss; the same T targets, but the model runs T+1 positions
            return {"input_ids": w, "labels": w}

    class Stamps(TrainerCallback):
        def __init__(self):
            self.bounds, self.end, self.threads = [], [], None

        def on_step_begin(self, args, state, control, **kw):
            # HF fetches a step's batch just before this call, so boundary k → k+1 spans one full step
            self.bounds.append(gate.boundary("hf"))

        def on_step_end(self, args, state, control, **kw):
            self.end.append(time.perf_counter())
            self.threads = torch.get_num_threads()

    class LastLossTrainer(Trainer):
        last_loss = None

        def training_step(self, *a, **kw):
            loss = super().training_step(*a, **kw)
            self.last_loss = loss
            return loss

    # HF Trainer's default optimizer (optim="adamw_torch") is torch.optim.AdamW with torch's
    # default kernel, the single-tensor loop on the CPU: our grouping and hyper-parameters with
    # that kernel, whatever --ours-adamw says
    opt = make_optimizer(model, su.tcfg, impl="single")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, su.tcfg))
    cb = Stamps()
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=tmp, max_steps=su.total, per_device_train_batch_size=su.B,
            learning_rate=su.tcfg.lr, max_grad_norm=su.tcfg.grad_clip, seed=su.seed,
            train_sampling_strategy="sequential", dataloader_drop_last=True,
            dataloader_num_workers=0, dataloader_pin_memory=False, remove_unused_columns=False,
            save_strategy="no", eval_strategy="no", logging_strategy="steps", logging_steps=10 ** 9,
            report_to=[], use_cpu=True, disable_tqdm=True,
        )
        trainer = LastLossTrainer(model=model, args=args, train_dataset=Windows(),
                                  optimizers=(opt, sched), callbacks=[cb])
        trainer.train()
    assert len(cb.bounds) == su.total, (len(cb.bounds), su.total)
    inside = sum(e - b[1][0] for b, e in zip(cb.bounds[su.W:su.W + su.S], cb.end[su.W:su.W + su.S]))
    return {**_timings(cb.bounds, su.W, su.S), "seconds_step_begin_to_end": inside,
            "final_train_loss": float(trainer.last_loss), "threads": cb.threads, "_model": model}


def run_pair(su: Setup, labels_mode: str, interleave: str, aa_control: bool = False) -> dict:
    """One run of each side: one after the other (interleave=run) or in lockstep (interleave=step).
    With `aa_control` the "hf" side runs our trainer too (an A/A test of the harness's side bias).
    The trainers' own output (our tokens/s line, which in lockstep also counts the waits; HF's
    metrics dict) is swallowed."""
    from methods.core.models import build_model
    from methods.core.train import evaluate_loss

    # both inits here, one after the other: build_model seeds torch's global RNG, which two
    # threads building at once would share (and HF's Trainer reseeds it in its constructor)
    models = {side: build_model(su.mcfg, su.tok, su.seed) for side in ("ours", "hf")}
    out: dict = {}

    def run_side(side, gate):
        if side == "ours" or aa_control:
            return run_ours(su, gate, models[side], side)
        return run_hf(su, gate, models[side], labels_mode)

    sink = io.StringIO()
    with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
        if interleave == "run":
            out["ours"] = run_side("ours", Solo())
            out["hf"] = run_side("hf", Solo())
        else:
            gate = Lockstep()

            def work(side):
                try:
                    out[side] = run_side(side, gate)
                except BaseException as e:  # re-raised below, in the main thread
                    out[side] = e
                finally:
                    gate.finish(side)

            threads = [threading.Thread(target=work, args=(side,)) for side in ("ours", "hf")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    for side in ("ours", "hf"):
        if isinstance(out[side], BaseException):
            raise out[side]
        out[side]["eval_loss"] = evaluate_loss(out[side]["_model"], su.eval_batches)
    return out


def max_param_diff(a, b) -> float:
    import torch

    sa, sb = a.state_dict(), b.state_dict()
    with torch.no_grad():
        return max(float((sa[k] - sb[k]).abs().max()) for k in sa)


def run_batched_vs_sequential(su: Setup, K: int, steps: int, B: int) -> dict:
    """K seeds of the recipe (init seed and data seed su.seed + k) trained two ways in lockstep:
    K `train()` runs one after the other ("sequential"), and one `train_batched` run of the K
    stacked members ("batched"). The two sides take turns in two threads: K sequential steps,
    then one batched step (K member-steps), so both do the same work per turn under the same
    load. A side's time is the sum of its turns, from its first step to the end of its last run
    (the sequential side's later runs pay their own setup: optimizer, train() bookkeeping);
    all models are built beforehand in the main thread (build_model seeds the global RNG)."""
    from methods.core.batched import train_batched
    from methods.core.models import build_model
    from methods.core.train import TrainConfig, config_dict, train

    cfg = TrainConfig(**{**config_dict(su.tcfg), "steps": steps, "batch_size": B,
                         "warmup_steps": min(su.W, steps), "log_every": steps})
    seeds = [su.seed + k for k in range(K)]
    models = {side: [build_model(su.mcfg, su.tok, s) for s in seeds] for side in ("ours", "hf")}
    gate = Lockstep()
    bounds: dict = {"ours": [], "hf": []}
    ends: dict = {}
    out: dict = {}

    def sequential():
        n = 0
        for k, s in enumerate(seeds):
            def bf(step, s=s):
                nonlocal n
                if n % K == 0:
                    bounds["ours"].append(gate.boundary("ours"))
                n += 1
                return su.stream.batch(step, B, s)
            train(models["ours"][k], bf, cfg, desc=f"seed {s}")

    def batched():
        def bf(step, k):
            if k == 0:
                bounds["hf"].append(gate.boundary("hf"))
            return su.stream.batch(step, B, seeds[k])
        train_batched(lambda k: models["hf"][k], K, bf, cfg)

    def work(side, fn):
        try:
            fn()
        except BaseException as e:  # re-raised below, in the main thread
            out[side] = e
        finally:
            ends[side] = _now()
            gate.finish(side)

    sink = io.StringIO()
    with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
        threads = [threading.Thread(target=work, args=a) for a in (("ours", sequential), ("hf", batched))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    res = {}
    for side, name in (("ours", "sequential"), ("hf", "batched")):
        if isinstance(out.get(side), BaseException):
            raise out[side]
        b = bounds[side] + [(ends[side], None)]
        wall = sum(b[i + 1][0][0] - b[i][1][0] for i in range(len(b) - 1))
        cpu = sum(b[i + 1][0][1] - b[i][1][1] for i in range(len(b) - 1))
        tokens = K * steps * B * su.T
        res[name] = {"seconds": wall, "cpu_seconds": cpu, "tokens_per_s": tokens / wall, "tokens_per_s_cpu": tokens / cpu}
    res["max_param_abs_diff"] = max(max_param_diff(a, b) for a, b in zip(models["ours"], models["hf"]))
    return res


def batched_section(args, su: Setup) -> list[dict]:
    """--batched-seeds K: batched vs sequential tokens/s at each --batched-batch-sizes, R repeats."""
    out = []
    for B in args.batched_batch_sizes:
        reps = [run_batched_vs_sequential(su, args.batched_seeds, args.batched_steps, B) for _ in range(args.repeats)]
        row = {"K": args.batched_seeds, "batch_size": B, "steps": args.batched_steps, "repeats": reps}
        for key in ("tokens_per_s", "tokens_per_s_cpu"):
            for name in ("sequential", "batched"):
                row[f"{name}_{key}"] = statistics.median(r[name][key] for r in reps)
            row[f"ratio_{key}"] = statistics.median(r["batched"][key] / r["sequential"][key] for r in reps)
            row[f"ratio_{key}_all"] = [r["batched"][key] / r["sequential"][key] for r in reps]
        row["max_param_abs_diff"] = max(r["max_param_abs_diff"] for r in reps)
        print(f"batched {row['K']} seeds vs {row['K']} sequential train() runs, B={B} T={su.T}, "
              f"{row['steps']} steps each: tokens/s wall {row['sequential_tokens_per_s']:,.0f} -> "
              f"{row['batched_tokens_per_s']:,.0f} (x{row['ratio_tokens_per_s']:.2f}; pairs "
              + ", ".join(f"{x:.2f}" for x in row["ratio_tokens_per_s_all"])
              + f"), per CPU-s {row['sequential_tokens_per_s_cpu']:,.0f} -> {row['batched_tokens_per_s_cpu']:,.0f} "
              f"(x{row['ratio_tokens_per_s_cpu']:.2f}); max |param diff| {row['max_param_abs_diff']:.1e}", flush=True)
        out.append(row)
    return out


# ------------------------------------------------------------------------ main ----
SUFFIXES = ("", "_median_step", "_cpu")  # timing of a rate: wall of the S steps, median step, process CPU
CLOCK_OF = {"": "wall", "_median_step": "wall", "_cpu": "cpu"}  # the clock each timing reads


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=None, help="timed steps S (tiny: 100, small: 20)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up steps W (tiny: 10, small: 3)")
    p.add_argument("--repeats", type=int, default=3, help="R runs per side, interleaved")
    p.add_argument("--model-size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for everything")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--corpus-chars", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hf-labels", choices=["shift", "window"], default="shift",
                   help="shift: HF gets input_ids = window[:-1] and shift_labels = window[1:] (same T "
                        "positions as ours); window: input_ids = labels = the T+1 window (HF shifts "
                        "internally; runs T+1 positions)")
    p.add_argument("--interleave", choices=["step", "run"], default="step",
                   help="step: each repeat runs both trainers in lockstep threads, alternating one step "
                        "at a time; run: each repeat runs ours then HF, one after the other")
    p.add_argument("--aa-control", action="store_true",
                   help="A/A control: run our trainer on both sides (the 'HF' column is ours again); "
                        "the ratio should be 1 -- what it is not is the harness's own bias and noise")
    p.add_argument("--skip-peak", action="store_true", help="skip the matmul peak measurements")
    p.add_argument("--ours-adamw", choices=["auto", "single", "foreach", "fused"], default="auto",
                   help="the AdamW kernel of our side (make_optimizer's impl; auto = what train() uses: "
                        "single-tensor on the CPU); HF always runs torch's default (single-tensor)")
    p.add_argument("--batched-seeds", type=int, default=0,
                   help="K > 0: also time K seeds trained as one vmapped model (methods.core.batched) "
                        "against K sequential train() runs, in lockstep")
    p.add_argument("--batched-steps", type=int, default=30, help="steps of each batched/sequential run")
    p.add_argument("--batched-batch-sizes", type=int, nargs="+", default=[8, 32])
    p.add_argument("--batched-only", action="store_true", help="skip ours vs HF (with --batched-seeds)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "trainer.json"))
    return p


def describe_model(args, su: Setup, fl: dict, flops_step: float) -> int:
    """Print the model, batch, FLOP and run settings; return the parameter count."""
    import torch

    from methods.core.models import build_model

    n_params = sum(p.numel() for p in build_model(su.mcfg, su.tok, 0).parameters())
    print(f"model {args.model_size}: d={su.mcfg.d_model} L={su.mcfg.n_layers} H={su.mcfg.n_heads} "
          f"d_ff={su.mcfg.d_ff} V={su.vocab} params={n_params:,} N_matmul={fl['N_matmul']:,}; "
          f"B={su.B} T={su.T}; {fl['flops_per_token'] / 1e6:.3f} MFLOP/token, {flops_step / 1e9:.3f} GFLOP/step; "
          f"threads={torch.get_num_threads()}; W={su.W} S={su.S} R={args.repeats}; interleave={args.interleave}"
          + ("; A/A CONTROL: both columns are our trainer" if args.aa_control else ""), flush=True)
    return n_params


def measure_peak(su: Setup) -> tuple[dict, dict]:
    """The square-matmul peak (its first measurement kept; re-measured after each repeat) and the
    matmul rates at the model's own shapes, printed."""
    peak = square_peak()
    peak["first"], peak["remeasured"] = {c: peak[c] for c in CLOCKS}, []
    shapes = model_shape_matmuls(su.mcfg, su.vocab, su.B, su.T)
    for c in CLOCKS:
        print(f"matmul peak ({c} clock, fp32, best of 8): "
              + ", ".join(f"n={n}: {g[c]:.1f}" for n, g in peak["by_size"].items())
              + f" GFLOP/s; at the model's shapes (matmul-only step): {shapes[c]:.1f} GFLOP/s", flush=True)
    return peak, shapes


def add_rates(res: dict, su: Setup, flops_step: float) -> None:
    """tokens/s and achieved GFLOP/s of one run, per timing (wall, median step, process CPU)."""
    res["median_step_seconds"] = statistics.median(res["step_seconds"])
    for suffix, sec in (("", res["seconds"] / su.S), ("_median_step", res["median_step_seconds"]),
                        ("_cpu", res["cpu_seconds"] / su.S)):
        res["tokens_per_s" + suffix] = su.B * su.T / sec
        res["gflops" + suffix] = flops_step / sec / 1e9


def run_repeats(args, su: Setup, flops_step: float, peak: dict | None) -> dict:
    """R repeats of the pair, printed as they finish: {"ours": [run], "hf": [run]}. After each
    repeat the two final models are compared, then dropped; with `peak` the matmul peak is measured
    again and the best of all kept (on a shared machine the quietest moment is the peak)."""
    runs = {"ours": [], "hf": []}
    for r in range(args.repeats):
        pair = run_pair(su, args.hf_labels, args.interleave, args.aa_control)
        for side in ("ours", "hf"):
            res = pair[side]
            add_rates(res, su, flops_step)
            runs[side].append(res)
            print(f"  repeat {r} {side:4s}: {res['tokens_per_s']:9,.0f} tok/s (median step "
                  f"{res['tokens_per_s_median_step']:6,.0f}, per CPU-s {res['tokens_per_s_cpu']:6,.0f})  "
                  f"{res['seconds'] / su.S * 1e3:6.2f} ms/step  "
                  f"loss(last step) {res['final_train_loss']:.6f}  eval {res['eval_loss']:.6f}", flush=True)
        runs["ours"][-1]["param_diff_vs_hf"] = max_param_diff(runs["ours"][-1]["_model"], runs["hf"][-1]["_model"])
        for side in runs:
            runs[side][-1].pop("_model")
        if peak:
            again = square_peak()
            peak["remeasured"].append(again)
            for c in CLOCKS:
                peak[c] = max(peak[c], again[c])
    return runs


def add_mfu(runs: dict, peak: dict | None) -> None:
    """MFU of every run per timing: achieved GFLOP/s over the peak on the same clock (None without a peak)."""
    for side in runs:
        for res in runs[side]:
            for suffix, c in CLOCK_OF.items():
                res["mfu" + suffix] = res["gflops" + suffix] / peak[c] if peak else None


def summarise(runs: dict, su: Setup, shapes: dict | None) -> dict:
    """Per side: medians over the repeats, ms/step, the fraction of the shape ceiling, and every
    repeat's tokens/s."""
    metric_keys = [m + suffix for suffix in SUFFIXES for m in ("tokens_per_s", "gflops", "mfu")]
    keys = metric_keys + ["seconds", "median_step_seconds", "cpu_seconds", "final_train_loss", "eval_loss"]
    summary = {}
    for side in runs:
        s = summary[side] = {k: (statistics.median(x[k] for x in runs[side]) if runs[side][0][k] is not None
                                 else None) for k in keys}
        s["ms_per_step"] = s["seconds"] / su.S * 1e3
        s["ms_per_step_median_step"] = s["median_step_seconds"] * 1e3
        if shapes:
            for suffix in SUFFIXES:
                s["frac_of_shape_attainable" + suffix] = s["gflops" + suffix] / shapes[CLOCK_OF[suffix]]
        for suffix in SUFFIXES:
            s[f"tokens_per_s{suffix}_all"] = [x["tokens_per_s" + suffix] for x in runs[side]]
    return summary


def speed_ratios(pairs: list, summary: dict) -> dict:
    """ours/HF tokens/s per timing: the median over pairs of the per-pair ratio (the two runs of a
    pair saw nearly the same machine load), the ratios themselves, and the ratio of the medians."""
    ratio = {}
    for key in ("tokens_per_s", "tokens_per_s_median_step", "tokens_per_s_cpu"):
        pr = [o[key] / h[key] for o, h in pairs]
        ratio[key] = {"median_of_pair_ratios": statistics.median(pr), "pair_ratios": pr,
                      "ratio_of_medians": summary["ours"][key] / summary["hf"][key]}
    return ratio


def correctness(pairs: list, runs: dict) -> dict:
    """Per pair: |Δ loss| of the last step and of the final weights on held-out batches, the largest
    |Δ parameter|; and whether every repeat of a side ended on the bitwise-same loss."""
    return {"final_train_loss_abs_diff": [abs(o["final_train_loss"] - h["final_train_loss"]) for o, h in pairs],
            "eval_loss_abs_diff": [abs(o["eval_loss"] - h["eval_loss"]) for o, h in pairs],
            "max_param_abs_diff": [o["param_diff_vs_hf"] for o, _ in pairs],
            "ours_repeats_identical": len({x["final_train_loss"] for x in runs["ours"]}) == 1,
            "hf_repeats_identical": len({x["final_train_loss"] for x in runs["hf"]}) == 1}


def _table_line(summary: dict, runs: dict, pairs: list, label: str, key: str, fmt: str,
                show_ratio: bool = True) -> None:
    """One row: ours, HF and (for a per-run metric) the median over pairs of ours/HF."""
    o, h = summary["ours"][key], summary["hf"][key]
    rr = ""
    if show_ratio and o is not None:
        r_ = statistics.median(a[key] / b[key] for a, b in pairs) if key in runs["ours"][0] else o / h
        rr = f"{r_:9.3f}"
    cells = [fmt.format(v) if v is not None else "-" for v in (o, h)]
    print(f"{label:30s}{cells[0]:>13s}{cells[1]:>13s}{rr}")


def print_table(args, runs: dict, summary: dict, pairs: list, peak: dict | None, shapes: dict | None) -> None:
    """The table: medians over the R repeats; ratio column = median over pairs of ours/HF."""
    print(f"\nmedians over {args.repeats} interleaved repeats. wall = S·B·T / wall time of the S steps; "
          f"med.step = B·T / median wall step time; cpu = S·B·T / process CPU time of the S steps "
          f"(tokens per CPU-second: at --threads 1, what an unshared core would do)")
    print(f"{'':30s}{'ours':>13s}{'HF Trainer':>13s}{'ours/HF':>9s}")

    def line(*a, **kw):
        _table_line(summary, runs, pairs, *a, **kw)

    for suffix, tag in zip(SUFFIXES, ("wall", "med.step", "cpu")):
        line(f"tokens/s ({tag})", "tokens_per_s" + suffix, "{:,.0f}")
        line(f"achieved GFLOP/s ({tag})", "gflops" + suffix, "{:.2f}")
        if peak:
            c = CLOCK_OF[suffix]
            line(f"MFU vs {peak[c]:.0f} GFLOP/s ({tag})", "mfu" + suffix, "{:.1%}")
            line(f"  of shape ceiling {shapes[c]:.0f} GFLOP/s", "frac_of_shape_attainable" + suffix, "{:.1%}",
                 show_ratio=False)
    line("ms/step (wall)", "ms_per_step", "{:.2f}", show_ratio=False)
    line("loss, last step", "final_train_loss", "{:.6f}", show_ratio=False)
    line("eval loss, final weights", "eval_loss", "{:.6f}", show_ratio=False)


def print_verdicts(summary: dict, ratio: dict, check: dict, peak: dict | None, shapes: dict | None) -> None:
    """The speed ratios, the correctness checks and the per-shape matmul rates."""
    for key, tag in (("tokens_per_s", "wall"), ("tokens_per_s_median_step", "med.step"), ("tokens_per_s_cpu", "cpu")):
        print(f"speed ratio ours/HF ({tag}): median of pairs {ratio[key]['median_of_pair_ratios']:.3f} "
              f"(pairs: {', '.join(f'{x:.3f}' for x in ratio[key]['pair_ratios'])}; "
              f"ratio of medians {ratio[key]['ratio_of_medians']:.3f})")
    if peak and any((summary[side][k] or 0) > 1 for side in summary for k in ("mfu", "mfu_median_step")):
        print("note: wall-clock MFU > 100%: the wall-clock peak was measured under heavier load from other "
              "jobs than the training saw; read the cpu rows")
    print(f"|loss diff| last step: {max(check['final_train_loss_abs_diff']):.2e}, "
          f"eval: {max(check['eval_loss_abs_diff']):.2e}, "
          f"max |param diff|: {max(check['max_param_abs_diff']):.2e}; runs bitwise repeatable: "
          f"ours {check['ours_repeats_identical']}, HF {check['hf_repeats_identical']}")
    if shapes:
        print("\nmatmuls at the model's shapes (fp32, best of 10 trials), GFLOP/s on the wall / CPU clock:")
        for row in shapes["rows"]:
            print(f"  {row['layer']:12s} {row['op']:26s} {row['shape']:24s} ×{row['count']:<3d} "
                  f"{row['gflops_wall']:6.1f} / {row['gflops_cpu']:6.1f}")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one, else what `platform` says."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    if args.ours_adamw != "auto":
        import methods.core.train as T

        default = T.make_optimizer  # train() calls it with no impl; run_hf passes impl="single"
        T.make_optimizer = lambda model, cfg, impl=args.ours_adamw: default(model, cfg, impl)
    t_start = time.perf_counter()
    load_before = os.getloadavg()

    su = Setup(args)
    fl = flops_per_token(su.mcfg, su.vocab, su.T)
    flops_step = fl["flops_per_token"] * su.B * su.T
    n_params = describe_model(args, su, fl, flops_step)
    peak, shapes = (None, None) if args.skip_peak else measure_peak(su)

    if args.batched_only:
        return {"batched": batched_section(args, su)}
    runs = run_repeats(args, su, flops_step, peak)
    if peak:
        print("matmul peak, best of all measurements: "
              + ", ".join(f"{c} clock {peak[c]:.1f} GFLOP/s" for c in CLOCKS))
    add_mfu(runs, peak)
    summary = summarise(runs, su, shapes)
    pairs = list(zip(runs["ours"], runs["hf"]))  # the two runs of an interleaved repeat
    ratio = speed_ratios(pairs, summary)
    check = correctness(pairs, runs)
    print_table(args, runs, summary, pairs, peak, shapes)
    print_verdicts(summary, ratio, check, peak, shapes)
    batched = batched_section(args, su) if args.batched_seeds > 0 else None

    result = {
        "config": {"model_size": args.model_size, "model": asdict(su.mcfg), "train": asdict(su.tcfg),
                   "batch_size": su.B, "seq_len": su.T, "vocab": su.vocab, "n_params": n_params,
                   "warmup_steps_untimed": su.W, "timed_steps": su.S, "repeats": args.repeats,
                   "threads": args.threads, "hf_labels": args.hf_labels, "interleave": args.interleave,
                   "aa_control": args.aa_control, "seed": args.seed},
        "flops": {**fl, "flops_per_step": flops_step,
                  "formula": "F_tok = 6*N + 12*L*T*d, N = L*(2*d*d + 2*d*d_kv + 3*d*d_ff) + V*d"},
        "peak": {"square": peak, "model_shapes": shapes},
        "runs": runs, "summary": summary, "ratio_ours_over_hf": ratio, "correctness": check, "batched": batched,
        "machine": {"cpu": cpu_name(), "cpu_count": os.cpu_count(),
                    "torch": torch.__version__, "transformers": transformers.__version__,
                    "python": platform.python_version(), "loadavg_before": load_before,
                    "loadavg_after": os.getloadavg()},
        "wall_seconds": time.perf_counter() - t_start,
    }
    out = Path(args.out)
    from methods.core.results import write_text

    write_text(out, json.dumps(result, indent=2) + "\n")  # atomic: a crash leaves no half-written file
    print(f"\nwrote {out} ({result['wall_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
