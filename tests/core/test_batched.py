"""methods/core/batched.py: K members trained as one vmapped model against K separate
`train.train` runs (the reference), and its optimizer pieces against torch.optim / torch's
`clip_grad_norm_` on the same gradients.

Tolerances. The optimizer pieces (per-member clipping, per-member decoupled decay, the stacked
AdamW) are elementwise or per-member reductions over the same data, so they are compared
bitwise. The whole run is compared bitwise too for the weights and the logged grad norms: on
the CPU at 1 thread vmap runs each member's matmuls through the same GEMM and falls back to a
per-member loop for the SDPA kernel, so the gradients come out identical. The logged loss is not
bitwise: the vmapped cross-entropy forms the mean in another order (|Δ| ≤ 1e-6 measured); it
is compared at rel 1e-6.
"""
from __future__ import annotations

import pytest
import torch

from methods.core import train as T
from methods.core.batched import member_clip_, train_batched
from methods.core.data import TokenStream
from methods.core.models import ModelConfig, build_model
from methods.core.results import InputError
from methods.core.tokenizer import train_tokenizer

torch.set_num_threads(1)

SEEDS = [0, 1, 2]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")


@pytest.fixture(scope="module")
def setup():
    text = "the cat sees a dog. the old bird sleeps near the river.\n" * 8
    tok = train_tokenizer([text], kind="char")
    mcfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64)
    return tok, mcfg, TokenStream.from_text(text, tok, seq_len=16)


def test_k_members_equal_k_separate_train_runs(setup):
    """3 seeds, each on its own data and with its own weight decay, clipping active on every
    step: the batched run's weights and grad norms equal three `train()` runs bit for bit."""
    tok, mcfg, stream = setup
    cfg = T.TrainConfig(steps=10, batch_size=4, lr=1e-2, weight_decay=0.1, warmup_steps=2,
                        min_lr_ratio=0.1, grad_clip=0.05, log_every=3)
    decays = [0.0, 0.1, 0.5]
    models, rows = train_batched(lambda k: build_model(mcfg, tok, SEEDS[k]), len(SEEDS),
                                 lambda s, k: stream.batch(s, cfg.batch_size, SEEDS[k]), cfg,
                                 weight_decays=decays)
    finals = []
    for k, seed in enumerate(SEEDS):
        ref = build_model(mcfg, tok, seed)
        ref_rows = T.train(ref, lambda s, seed=seed: stream.batch(s, cfg.batch_size, seed),
                           T.TrainConfig(**{**T.config_dict(cfg), "weight_decay": decays[k]}))
        assert [r["step"] for r in rows[k]] == [r["step"] for r in ref_rows] == [3, 6, 9, 10]
        assert [r["lr"] for r in rows[k]] == [r["lr"] for r in ref_rows]
        assert [r["grad_norm"] for r in rows[k]] == [r["grad_norm"] for r in ref_rows]
        assert min(r["grad_norm"] for r in ref_rows) > 5 * cfg.grad_clip       # clipping acted
        assert [r["loss"] for r in rows[k]] == pytest.approx([r["loss"] for r in ref_rows], rel=1e-6)
        for (n, p), q in zip(ref.named_parameters(), models[k].parameters()):
            assert torch.equal(p, q), (k, n)
        assert not models[k].training
        finals.append(models[k])
    # the members really differ (seeds, data, decay), and the tied head follows the embedding
    a, b = (dict(m.named_parameters()) for m in finals[:2])
    assert float((a["model.embed_tokens.weight"] - b["model.embed_tokens.weight"]).detach().abs().max()) > 1e-2
    assert all(m.lm_head.weight is m.model.embed_tokens.weight for m in finals)


def test_member_clip_equals_clip_grad_norm_per_member():
    g = torch.Generator().manual_seed(0)
    shapes = [(5, 3), (7,), (2, 2, 2)]
    K = 4
    stacked = [torch.randn(K, *s, generator=g) * (1 + torch.arange(K).view(-1, *[1] * len(s))) for s in shapes]
    want_norms, want = [], []
    for k in range(K):
        ps = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
        for p, t in zip(ps, stacked):
            p.grad = t[k].clone()
        want_norms.append(torch.nn.utils.clip_grad_norm_(ps, 2.0))
        want.append([p.grad for p in ps])
    got = [t.clone() for t in stacked]
    norms = member_clip_(got, 2.0)
    assert torch.equal(norms, torch.stack(want_norms))
    assert (norms > 2.0).sum() >= 2                                   # some members clipped …
    for k in range(K):
        for t, w in zip(got, want[k]):
            assert torch.equal(t[k], w)


def test_stacked_adamw_with_member_decay_is_per_member_adamw():
    """The optimizer half of a batched step on fixed gradients: decay θ(1 − γλ_k) then a stacked
    AdamW(weight_decay=0) equals K torch AdamW(weight_decay=λ_k), bitwise, over 20 steps."""
    g = torch.Generator().manual_seed(1)
    K, lams, lr = 3, [0.0, 0.1, 0.7], 3e-3
    theta = torch.randn(K, 6, 4, generator=g)
    grads = [torch.randn(K, 6, 4, generator=g) for _ in range(20)]
    st = torch.nn.Parameter(theta.clone())
    opt = torch.optim.AdamW([st], lr=lr, betas=(0.9, 0.95), weight_decay=0.0, foreach=True)
    refs = [torch.nn.Parameter(theta[k].clone()) for k in range(K)]
    ref_opts = [torch.optim.AdamW([p], lr=lr, betas=(0.9, 0.95), weight_decay=lams[k]) for k, p in enumerate(refs)]
    shrink = (1 - lr * torch.tensor(lams, dtype=torch.float64)).to(torch.float32).view(-1, 1, 1)
    for gr in grads:
        st.grad = gr.clone()
        with torch.no_grad():
            st.mul_(shrink)
        opt.step()
        for k, (p, o) in enumerate(zip(refs, ref_opts)):
            p.grad = gr[k].clone()
            o.step()
    for k in range(K):
        assert torch.equal(st[k].detach(), refs[k].detach()), k


def test_bad_arguments_raise_input_error(setup):
    tok, mcfg, stream = setup
    cfg = T.TrainConfig(steps=1, batch_size=2, lr=1e-3)
    mk = lambda k: build_model(mcfg, tok, k)  # noqa: E731
    bf = lambda s, k: stream.batch(s, 2, k)  # noqa: E731
    with pytest.raises(InputError, match="weight_decays"):
        train_batched(mk, 2, bf, cfg, weight_decays=[0.1])
    with pytest.raises(InputError, match="adamw"):
        train_batched(mk, 2, bf, T.TrainConfig(steps=1, batch_size=2, lr=1e-3, optimizer="sgd"))
