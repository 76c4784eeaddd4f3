"""methods/core/train.py against closed forms, torch.optim reference loops and transformers'
schedules.

Two kinds of model are used:
  * `InjectedGradModel`: a few free parameters whose loss gradient is whatever the test says
    (zero, or a fixed vector g). With a known gradient the optimizer trajectory has a closed form,
    so the trainer can be checked against arithmetic written out here, in float64 to ~1e-10.
  * a tiny `LlamaForCausalLM` from `methods.core.models.build_model`, trained by the trainer and
    by a plain loop that drives `torch.optim.AdamW` / `torch.optim.SGD` directly.
"""
from __future__ import annotations

import json
import math
import os
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from methods.core import train as T
from methods.core.data import PromptAnswerBatches, TokenStream
from methods.core.models import ModelConfig, build_model
from methods.core.results import InputError
from methods.core.tokenizer import train_tokenizer

torch.set_num_threads(1)

VOCAB = 5


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")


@pytest.fixture
def float64():
    """Run a test in float64: float32 drifts ~1e-5 from the closed forms over tens of steps."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


# ------------------------------------------------------------------ injected-gradient model ----
class InjectedGradModel(nn.Module):
    """Parameters of ndim 2, 1 and 0 (a matrix, a gain, a scalar) and a loss gradient we choose.

    The logits depend on every parameter through a zero-weighted term, so each parameter gets a
    gradient *tensor* (exactly 0): AdamW/SGD skip parameters whose .grad is None, which would
    silently skip their weight decay too. With `grads`, a tensor hook replaces that zero by the
    given constant, so every step sees exactly g.
    """

    def __init__(self, grads: dict[str, torch.Tensor] | None = None, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        dt = torch.get_default_dtype()
        self.w = nn.Parameter(torch.randn(4, 3, generator=g, dtype=dt))
        self.b = nn.Parameter(torch.randn(3, generator=g, dtype=dt))
        self.s = nn.Parameter(torch.randn((), generator=g, dtype=dt))
        for name, grad in (grads or {}).items():
            getattr(self, name).register_hook(lambda _g, grad=grad: grad.clone())

    def forward(self, input_ids, attention_mask=None):
        zero = sum((p * 0).sum() for p in self.parameters())
        logits = torch.zeros(*input_ids.shape, VOCAB, dtype=zero.dtype) + zero
        return SimpleNamespace(logits=logits)


def const_batch(_step: int) -> dict:
    return {"input_ids": torch.zeros(2, 3, dtype=torch.long), "labels": torch.ones(2, 3, dtype=torch.long)}


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def recording_batch_fn(model, trajectory: list):
    """batch_fn(step) runs before update `step`, so it sees θ after `step` updates."""
    def fn(step):
        assert len(trajectory) == step
        trajectory.append(snapshot(model))
        return const_batch(step)
    return fn


def random_grads(seed: int = 1, scale: float = 1.0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dt = torch.get_default_dtype()
    return {"w": scale * torch.randn(4, 3, generator=g, dtype=dt),
            "b": scale * torch.randn(3, generator=g, dtype=dt),
            "s": scale * torch.randn((), generator=g, dtype=dt)}


# ------------------------------------------------------------------------------ AdamW ----
@pytest.mark.parametrize("decay_min_ndim", [2, 0])
def test_adamw_zero_grad_is_pure_decoupled_decay(float64, decay_min_ndim):
    """g = 0 ⇒ m = v = 0, the Adam step is 0/(0+ε) = 0, and only the decoupled decay acts:
    θ_T = θ_0 ∏_t (1 − γ_t λ), γ_t = lr·lr_factor(t). No-decay tensors must not move at all."""
    cfg = T.TrainConfig(steps=40, batch_size=1, lr=0.05, weight_decay=0.3, warmup_steps=5,
                        min_lr_ratio=0.1, log_every=1, decay_min_ndim=decay_min_ndim)
    model = InjectedGradModel()
    theta0 = snapshot(model)
    rows = T.train(model, const_batch, cfg)

    gammas = [cfg.lr * T.lr_factor(t, cfg) for t in range(cfg.steps)]
    assert [r["lr"] for r in rows] == gammas            # the logged lr is the scheduled one
    assert all(r["grad_norm"] == 0.0 for r in rows)
    shrink = 1.0
    for gam in gammas:
        shrink *= 1 - gam * cfg.weight_decay
    assert 0.3 < shrink < 0.9                            # the decay is material, not ~1
    for name, p in model.named_parameters():
        if p.ndim >= decay_min_ndim:
            torch.testing.assert_close(p.detach(), theta0[name] * shrink, rtol=1e-13, atol=0)
        else:
            assert torch.equal(p.detach(), theta0[name]), f"no-decay param {name} moved"


def adamw_reference_trajectory(theta0, grads, cfg, decayed: set[str]):
    """AdamW written out (Loshchilov & Hutter, decoupled; torch's convention of scaling the decay
    by the scheduled lr): m ← β1 m + (1−β1) g, v ← β2 v + (1−β2) g², m̂ = m/(1−β1ᵗ),
    v̂ = v/(1−β2ᵗ), θ ← θ(1 − γ_t λ) − γ_t m̂/(√v̂ + ε)."""
    b1, b2 = cfg.betas
    theta = {n: t.clone() for n, t in theta0.items()}
    m = {n: torch.zeros_like(t) for n, t in theta0.items()}
    v = {n: torch.zeros_like(t) for n, t in theta0.items()}
    traj = [{n: t.clone() for n, t in theta.items()}]
    for step in range(cfg.steps):
        gam = cfg.lr * T.lr_factor(step, cfg)
        t = step + 1
        for n in theta:
            g = grads[n]
            m[n] = b1 * m[n] + (1 - b1) * g
            v[n] = b2 * v[n] + (1 - b2) * g * g
            mhat, vhat = m[n] / (1 - b1 ** t), v[n] / (1 - b2 ** t)
            lam = cfg.weight_decay if n in decayed else 0.0
            theta[n] = theta[n] * (1 - gam * lam) - gam * mhat / (vhat.sqrt() + cfg.eps)
        traj.append({n: t_.clone() for n, t_ in theta.items()})
    return traj


def test_adamw_constant_grad_matches_hand_recursion(float64):
    cfg = T.TrainConfig(steps=30, batch_size=1, lr=0.02, betas=(0.9, 0.95), eps=1e-8,
                        weight_decay=0.1, warmup_steps=3, min_lr_ratio=0.05, log_every=1)
    grads = random_grads()
    model = InjectedGradModel(grads)
    theta0 = snapshot(model)
    traj: list = []
    rows = T.train(model, recording_batch_fn(model, traj), cfg)
    traj.append(snapshot(model))
    ref = adamw_reference_trajectory(theta0, grads, cfg, decayed={"w"})
    assert len(traj) == len(ref) == cfg.steps + 1
    for t, (got, want) in enumerate(zip(traj, ref)):
        for n in want:
            torch.testing.assert_close(got[n], want[n], rtol=0, atol=1e-10, msg=f"step {t} param {n}")
    # the logged norm is the global norm of g, every step
    gnorm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    assert [r["grad_norm"] for r in rows] == pytest.approx([gnorm] * cfg.steps, rel=1e-12)
    # sanity: the parameters really moved by O(Σγ), so atol 1e-10 is a tight comparison
    assert float((traj[-1]["w"] - theta0["w"]).abs().max()) > 0.1


def tiny_setup(seed: int = 0, tie: bool = True):
    text = "the cat sees a dog. the old bird sleeps near the river.\n" * 8
    tok = train_tokenizer([text], kind="char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64,
                                    tie_embeddings=tie), tok, seed)
    stream = TokenStream.from_text(text, tok, seq_len=16)
    return model, tok, stream


def reference_groups(model, cfg):
    """Decay = matrices/embeddings (ndim ≥ 2), no-decay = the rest; built here, not by the code
    under test. model.parameters() deduplicates the tied embedding/lm_head tensor."""
    ps = list(model.parameters())
    return [{"params": [p for p in ps if p.ndim >= 2], "weight_decay": cfg.weight_decay},
            {"params": [p for p in ps if p.ndim < 2], "weight_decay": 0.0}]


def hf_cosine_factor(step, cfg):
    """The schedule as transformers defines it (get_cosine_with_min_lr_schedule_with_warmup)."""
    from transformers.optimization import get_cosine_with_min_lr_schedule_with_warmup

    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = get_cosine_with_min_lr_schedule_with_warmup(opt, cfg.warmup_steps, cfg.steps,
                                                        min_lr_rate=cfg.min_lr_ratio)
    return sched.lr_lambdas[0](step)


def reference_loop(model, stream, cfg, opt, clip: float = 0.0):
    """What the trainer should do, step by step, with torch.optim driven by hand. The ops are the
    trainer's, so today the results agree bit for bit; the comparisons allow ~1 float32 ulp
    (rtol 1e-6, atol 1e-7) so an lr computed one rounding differently does not fail them."""
    params = [p for g in opt.param_groups for p in g["params"]]
    losses, norms = [], []
    model.train()
    for step in range(cfg.steps):
        for g in opt.param_groups:
            g["lr"] = cfg.lr * hf_cosine_factor(step, cfg)
        b = stream.batch(step, cfg.batch_size, cfg.seed)
        logits = model(input_ids=b["input_ids"]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), b["labels"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        if clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
        opt.step()
        losses.append(float(loss))
    return losses, norms


def test_adamw_matches_torch_optim_reference_loop():
    cfg = T.TrainConfig(steps=12, batch_size=4, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.2,
                        warmup_steps=3, min_lr_ratio=0.1, log_every=1, seed=5)
    model, _, stream = tiny_setup()
    ref_model, _, _ = tiny_setup()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), ref_model.parameters()))
    rows = T.train(model, lambda s: stream.batch(s, cfg.batch_size, cfg.seed), cfg)
    opt = torch.optim.AdamW(reference_groups(ref_model, cfg), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    losses, _ = reference_loop(ref_model, stream, cfg, opt)
    assert [r["loss"] for r in rows] == pytest.approx(losses, rel=1e-6)
    for (n, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=n)
    # and the run did something: weights differ from a fresh init by far more than atol
    fresh, _, _ = tiny_setup()
    delta = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), fresh.parameters()))
    assert delta > 1e-3


# -------------------------------------------------------------------------------- SGD ----
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_matches_torch_optim_reference_loop(momentum):
    cfg = T.TrainConfig(steps=10, batch_size=4, lr=0.3, optimizer="sgd", momentum=momentum,
                        weight_decay=0.05, warmup_steps=2, log_every=1, seed=3)
    model, _, stream = tiny_setup()
    ref_model, _, _ = tiny_setup()
    rows = T.train(model, lambda s: stream.batch(s, cfg.batch_size, cfg.seed), cfg)
    opt = torch.optim.SGD(reference_groups(ref_model, cfg), lr=cfg.lr, momentum=momentum)
    losses, _ = reference_loop(ref_model, stream, cfg, opt)
    assert [r["loss"] for r in rows] == pytest.approx(losses, rel=1e-6)
    for (n, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=n)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_weight_decay_is_l2_in_the_gradient(float64, momentum):
    """make_optimizer passes the group's weight_decay to torch.optim.SGD, i.e. coupled L2:
    d = g + λθ (decay group only), buf ← μ·buf + d (buf = d at t=0), θ ← θ − γ_t·buf.
    With momentum the decay term is accumulated in the buffer, so the result differs from the
    decoupled θ_0∏(1−γ_t λ) that AdamW gives; with μ = 0 and g = 0 the two coincide."""
    cfg = T.TrainConfig(steps=25, batch_size=1, lr=0.1, optimizer="sgd", momentum=momentum,
                        weight_decay=0.2, warmup_steps=4, min_lr_ratio=0.1, log_every=1)
    for grads in (None, random_grads(seed=2)):
        model = InjectedGradModel(grads)
        theta0 = snapshot(model)
        T.train(model, const_batch, cfg)
        theta = {n: t.clone() for n, t in theta0.items()}
        buf: dict = {}
        for step in range(cfg.steps):
            gam = cfg.lr * T.lr_factor(step, cfg)
            for n in theta:
                g = grads[n] if grads else torch.zeros_like(theta[n])
                d = g + (cfg.weight_decay * theta[n] if n == "w" else 0.0)
                buf[n] = d.clone() if step == 0 or momentum == 0 else momentum * buf[n] + d
                theta[n] = theta[n] - gam * buf[n]
        for n, p in model.named_parameters():
            torch.testing.assert_close(p.detach(), theta[n], rtol=0, atol=1e-10, msg=n)
        if grads is None:
            decoupled = theta0["w"].clone()
            for step in range(cfg.steps):
                decoupled *= 1 - cfg.lr * T.lr_factor(step, cfg) * cfg.weight_decay
            close = torch.allclose(model.w.detach(), decoupled, rtol=1e-12, atol=0)
            assert close == (momentum == 0.0)
            assert torch.equal(model.b.detach(), theta0["b"])   # no-decay group untouched


# ---------------------------------------------------------------------------- schedule ----
@pytest.mark.parametrize("steps,warmup", [(1, 0), (10, 0), (10, 1), (37, 5), (20, 20), (100, 10)])
def test_cosine_schedule_matches_transformers(steps, warmup):
    from transformers.optimization import get_cosine_schedule_with_warmup, get_cosine_with_min_lr_schedule_with_warmup

    def hf(make, **kw):
        opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
        sched = make(opt, num_warmup_steps=warmup, num_training_steps=steps, **kw)
        out = []
        for _ in range(steps):          # the trainer's updates are steps 0 .. steps-1
            out.append(sched.get_last_lr()[0])
            opt.step()
            sched.step()
        return out

    cfg = T.TrainConfig(steps=steps, batch_size=1, lr=1.0, warmup_steps=warmup)
    ours = [T.lr_factor(t, cfg) for t in range(steps)]
    assert ours == pytest.approx(hf(get_cosine_schedule_with_warmup), rel=1e-12, abs=1e-15)
    for rate in (0.1, 0.5):
        cfg = T.TrainConfig(steps=steps, batch_size=1, lr=1.0, warmup_steps=warmup, min_lr_ratio=rate)
        ours = [T.lr_factor(t, cfg) for t in range(steps)]
        want = hf(get_cosine_with_min_lr_schedule_with_warmup, min_lr_rate=rate)
        assert ours == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert min(ours[warmup:] or [rate]) >= rate - 1e-15   # never below the floor


@pytest.mark.parametrize("warmup", [0, 1, 7])
def test_constant_schedule_and_linear_warmup(warmup):
    from transformers.optimization import get_constant_schedule_with_warmup

    steps = 20
    cfg = T.TrainConfig(steps=steps, batch_size=1, lr=1.0, warmup_steps=warmup, schedule="constant")
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = get_constant_schedule_with_warmup(opt, num_warmup_steps=warmup)
    for t in range(steps):
        assert T.lr_factor(t, cfg) == pytest.approx(sched.get_last_lr()[0], rel=1e-15, abs=0)
        opt.step()
        sched.step()
    # warm-up is exactly linear from 0: f(t) = t / warmup, equal increments
    f = [T.lr_factor(t, cfg) for t in range(warmup + 1)]
    assert f[-1] == 1.0
    if warmup:
        assert f == pytest.approx([t / warmup for t in range(warmup + 1)], abs=1e-15)
    assert all(x == 1.0 for x in (T.lr_factor(t, cfg) for t in range(warmup, steps)))


# ------------------------------------------------------------------------ param groups ----
@pytest.mark.parametrize("tie", [True, False])
def test_param_groups_on_tiny_llama(tie):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    model, _, _ = tiny_setup(tie=tie)
    cfg = T.TrainConfig(steps=1, batch_size=1, lr=1e-3, weight_decay=0.1)
    groups = T.param_groups(model, cfg)
    by_name = {g["name"]: g for g in groups}
    assert by_name["decay"]["weight_decay"] == 0.1 and by_name["no_decay"]["weight_decay"] == 0.0
    decay_ids = [id(p) for p in by_name["decay"]["params"]]
    no_decay_ids = [id(p) for p in by_name["no_decay"]["params"]]

    # classification from module types, independent of tensor ndim
    norm_ids = {id(m.weight) for m in model.modules() if isinstance(m, LlamaRMSNorm)}
    matrix_ids = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))}
    assert set(no_decay_ids) == norm_ids
    assert set(decay_ids) == matrix_ids
    assert id(model.get_input_embeddings().weight) in decay_ids
    assert id(model.get_output_embeddings().weight) in decay_ids
    # every parameter exactly once; the tied tensor once, not twice
    all_ids = decay_ids + no_decay_ids
    assert len(all_ids) == len(set(all_ids))
    unique = {id(p) for p in model.parameters()}
    assert set(all_ids) == unique
    n_linear_weights = sum(1 for m in model.modules() if isinstance(m, nn.Linear))
    assert len(decay_ids) == n_linear_weights + 1 - (1 if tie else 0)
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tie
    # torch accepts the groups (it raises on a tensor listed twice) and keeps the decays
    opt = T.make_optimizer(model, cfg)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    # decay_min_ndim = 0: everything decays
    cfg0 = T.TrainConfig(steps=1, batch_size=1, lr=1e-3, weight_decay=0.1, decay_min_ndim=0)
    g0 = {g["name"]: g for g in T.param_groups(model, cfg0)}
    assert {id(p) for p in g0["decay"]["params"]} == unique and not g0["no_decay"]["params"]


# ------------------------------------------------------------------------ grad clipping ----
def test_grad_clip_closed_form_sgd(float64):
    """One SGD step with a huge gradient (‖g‖ ≈ 1e6) and grad_clip = c: the update must be
    −lr·g·c/(‖g‖+1e-6) (torch's clip coefficient), i.e. an update of norm lr·c; the logged
    grad_norm is the pre-clip ‖g‖."""
    c, lr = 0.5, 0.1
    grads = random_grads(seed=4, scale=3e5)
    gnorm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    assert gnorm > 1e5
    model = InjectedGradModel(grads)
    theta0 = snapshot(model)
    cfg = T.TrainConfig(steps=1, batch_size=1, lr=lr, optimizer="sgd", schedule="constant",
                        grad_clip=c, log_every=1)
    rows = T.train(model, const_batch, cfg)
    assert rows[0]["grad_norm"] == pytest.approx(gnorm, rel=1e-12)
    coef = c / (gnorm + 1e-6)
    upd_sq = 0.0
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), theta0[n] - lr * coef * grads[n], rtol=0, atol=1e-12)
        upd_sq += float(((p.detach() - theta0[n]) ** 2).sum())
    assert math.sqrt(upd_sq) == pytest.approx(lr * c, rel=1e-9)


def test_grad_clip_adamw_matches_reference_loop():
    """Tiny Llama, AdamW, clip active on every step: parameters equal a loop that calls
    clip_grad_norm_ itself; logged grad_norm equals the pre-clip norm that loop sees."""
    cfg = T.TrainConfig(steps=8, batch_size=4, lr=1e-2, weight_decay=0.1, warmup_steps=2,
                        grad_clip=0.05, log_every=1, seed=7)
    model, _, stream = tiny_setup()
    ref_model, _, _ = tiny_setup()
    rows = T.train(model, lambda s: stream.batch(s, cfg.batch_size, cfg.seed), cfg)
    opt = torch.optim.AdamW(reference_groups(ref_model, cfg), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    _, norms = reference_loop(ref_model, stream, cfg, opt, clip=cfg.grad_clip)
    assert min(norms) > 5 * cfg.grad_clip                  # clipping really happened
    assert [r["grad_norm"] for r in rows] == pytest.approx(norms, rel=1e-5)
    for (n, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=n)
    # and it matters: the same run without clipping ends elsewhere
    unclipped, _, _ = tiny_setup()
    T.train(unclipped, lambda s: stream.batch(s, cfg.batch_size, cfg.seed),
            T.TrainConfig(**{**T.config_dict(cfg), "grad_clip": 0.0}))
    assert max(float((p - q).abs().max()) for p, q in zip(model.parameters(), unclipped.parameters())) > 1e-4


# ------------------------------------------------------------------ checkpoint / resume ----
class Interrupt(RuntimeError):
    pass


def test_checkpoint_resume_is_bitwise_identical(tmp_path, monkeypatch):
    cfg = T.TrainConfig(steps=9, batch_size=4, lr=5e-3, weight_decay=0.1, warmup_steps=2,
                        ckpt_every=3, eval_every=2, log_every=2, seed=11)
    _, _, stream = tiny_setup()
    eval_batches = stream.sequential_batches(4, 2)

    def run(model, batch_fn, ckpt):
        return T.train(model, batch_fn, cfg, ckpt_path=ckpt,
                       eval_fn=lambda: {"val_loss": T.evaluate_loss(model, eval_batches)})

    def batches(s):
        return stream.batch(s, cfg.batch_size, cfg.seed)

    # 1) uninterrupted, with checkpoints being written along the way
    m1, _, _ = tiny_setup()
    ck1 = tmp_path / "a" / "ckpt.pt"
    rows1 = run(m1, batches, ck1)
    assert not ck1.exists()                                  # removed after the last step

    # 2) interrupted at step 7: the last checkpoint is the one after 6 updates
    ck = tmp_path / "b" / "ckpt.pt"
    m2, _, _ = tiny_setup()

    def dying(s):
        if s == 7:
            raise Interrupt("killed")
        return batches(s)

    with pytest.raises(Interrupt):
        run(m2, dying, ck)
    assert ck.is_file()
    state = torch.load(ck, map_location="cpu", weights_only=True)  # safe types only
    assert state["step"] == 6
    assert len(state["rows"]) == sum(1 for r in rows1 if r["step"] <= 6)
    assert [json.loads(r) for r in state["rows"]] == [r for r in rows1 if r["step"] <= 6]
    assert list(os.listdir(ck.parent)) == ["ckpt.pt"]        # no temp files left beside it

    # 3) resume in a fresh process-equivalent: a model with a *different* init, so equality can
    #    only come from the checkpoint; the loader must use weights_only=True
    m3, _, _ = tiny_setup(seed=123)
    calls = []
    real_load = torch.load

    def spy(*a, **kw):
        calls.append(kw.get("weights_only"))
        return real_load(*a, **kw)

    monkeypatch.setattr(torch, "load", spy)
    rows3 = run(m3, batches, ck)
    assert calls == [True]
    assert rows3 == rows1                                   # exact, floats included
    assert {"val_loss"} <= set().union(*rows1) and rows1[-1]["step"] == cfg.steps
    for (n, p), q in zip(m1.named_parameters(), m3.parameters()):
        assert torch.equal(p, q), n
    assert not ck.exists()


def test_corrupt_checkpoint_raises_input_error_naming_file(tmp_path):
    cfg = T.TrainConfig(steps=4, batch_size=2, lr=1e-3, ckpt_every=2)
    model, _, stream = tiny_setup()
    ck = tmp_path / "ckpt.pt"
    ck.write_bytes(b"this is not a torch checkpoint")
    with pytest.raises(InputError, match="corrupt checkpoint") as e:
        T.train(model, lambda s: stream.batch(s, 2, 0), cfg, ckpt_path=ck)
    assert str(ck) in str(e.value)
    # a truncated real checkpoint too
    T._save_checkpoint(ck, model, T.make_optimizer(model, cfg), 2, [])
    data = ck.read_bytes()
    ck.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as e:
        T.train(model, lambda s: stream.batch(s, 2, 0), cfg, ckpt_path=ck)
    assert str(ck) in str(e.value)


# ---------------------------------------------------------------------------- eval loss ----
def test_evaluate_loss_is_token_weighted_mean_ce():
    model, tok, _ = tiny_setup()
    pairs = [("the cat ", "sees"), ("a dog", " sleeps near the river."), ("old ", "bird"),
             ("the river sees a cat near the ", "dog."), ("t", "he")]
    pa = PromptAnswerBatches(pairs, tok, end="\n")
    batches = pa.sequential_batches(batch_size=2)
    assert len(batches) == 3 and len({b["input_ids"].shape[1] for b in batches}) > 1
    assert all((b["labels"] == -100).any() for b in batches)
    model.train()
    got = T.evaluate_loss(model, batches)
    assert model.training                                   # mode restored
    with torch.no_grad():
        model.eval()
        logits = torch.cat([model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
                            .logits.reshape(-1, len(tok)) for b in batches])
        labels = torch.cat([b["labels"].reshape(-1) for b in batches])
        want = float(F.cross_entropy(logits.double(), labels, ignore_index=-100, reduction="mean"))
    # a plain (unweighted) mean of per-batch means differs: the test can tell them apart
    per_batch = [float(F.cross_entropy(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
                                       .logits.reshape(-1, len(tok)), b["labels"].reshape(-1)))
                 for b in batches]
    assert got == pytest.approx(want, rel=1e-6)
    assert abs(sum(per_batch) / len(per_batch) - want) > 1e-4


def test_a_nan_loss_is_logged_as_null_in_strict_json(tmp_path):
    """A diverged run (NaN loss and gradients) still leaves a log every JSON reader can parse:
    the non-finite values are written as null (RFC 8259 has no NaN)."""
    import json

    cfg = T.TrainConfig(steps=3, batch_size=1, lr=0.05, log_every=1)
    model = InjectedGradModel(grads={"w": torch.full((4, 3), float("nan"))})
    with torch.no_grad():
        model.s.fill_(float("nan"))  # logits, hence the loss, are NaN from the first step
    T.train(model, const_batch, cfg, log_path=tmp_path / "log.jsonl")

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    rows = [json.loads(line, parse_constant=refuse) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["loss"] is None for r in rows)
