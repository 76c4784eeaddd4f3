"""methods.core.moe against transformers' Mixtral MoE block, its aux loss, and naive loops."""
import math

import pytest
import torch
import torch.nn.functional as F

from methods.core.moe import MoELayer, expected_params, load_balancing_loss, pool_layers

torch.set_num_threads(1)
mixtral = pytest.importorskip("transformers.models.mixtral.modeling_mixtral")
from transformers import MixtralConfig  # noqa: E402

D, E, K, DFF = 16, 6, 2, 24


def _mixtral_block(dtype, seed=0):
    cfg = MixtralConfig(hidden_size=D, intermediate_size=DFF, num_local_experts=E,
                        num_experts_per_tok=K, hidden_act="silu", router_jitter_noise=0.0)
    cfg._experts_implementation = "eager"  # the reference loop, not a hub kernel
    torch.manual_seed(seed)
    blk = mixtral.MixtralSparseMoeBlock(cfg)
    with torch.no_grad():
        for p in blk.parameters():
            p.normal_(0, 0.3)
    return blk.to(dtype).eval()


def _ours_from(blk, dtype, **kw):
    m = MoELayer(D, E, K, DFF, **kw)
    m.load_mixtral(blk)
    return m.to(dtype)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("dispatch", ["sorted", "rounds", "dense"])
def test_equals_mixtral_block(dtype, tol, dispatch):
    blk = _mixtral_block(dtype)
    # Mixtral always takes the router softmax in float32; match it exactly.
    ours = _ours_from(blk, dtype, dispatch=dispatch, softmax_dtype=torch.float32)
    torch.manual_seed(1)
    x = torch.randn(3, 7, D, dtype=dtype)
    with torch.no_grad():
        ref_y = blk(x.clone())
        ref_logits, ref_w, ref_idx = blk.gate(x.reshape(-1, D))
        out = ours(x)
    assert out.y.shape == x.shape and out.y.dtype == dtype
    assert torch.equal(out.topk_idx, ref_idx)
    assert torch.allclose(out.router_logits, ref_logits, rtol=0, atol=tol)
    assert torch.allclose(out.topk_weights, ref_w, rtol=0, atol=tol)
    assert torch.allclose(out.y, ref_y, rtol=0, atol=tol), (out.y - ref_y).abs().max()
    assert out.topk_idx.shape == (21, K) and out.expert_out.shape == (21, K, D)


def test_float64_softmax_in_input_dtype_differs_from_mixtral_only_at_float32_level():
    blk = _mixtral_block(torch.float64)
    ours = _ours_from(blk, torch.float64)  # softmax in float64
    x = torch.randn(40, D, dtype=torch.float64)
    with torch.no_grad():
        d = (ours(x).y - blk(x[None]).reshape(40, D)).abs().max().item()
    assert d < 1e-5  # same maths; only Mixtral's float32 softmax rounding separates them


def _naive(m: MoELayer, x, renormalize=True):
    """Per-token Python loop straight from the definitions (float64)."""
    Wr = m.router.proj.weight
    ys = []
    for t in range(x.shape[0]):
        p = torch.softmax(Wr @ x[t], -1)
        order = sorted(range(E), key=lambda e: -p[e].item())[:K]
        g = torch.stack([p[e] for e in order])
        if renormalize:
            g = g / g.sum()
        y = torch.zeros(D, dtype=x.dtype)
        for gk, e in zip(g, order):
            h = F.silu(m.experts.w_gate[e] @ x[t]) * (m.experts.w_up[e] @ x[t])
            y = y + gk * (m.experts.w_down[e] @ h)
        ys.append(y)
    return torch.stack(ys)


@pytest.mark.parametrize("dispatch", ["sorted", "rounds", "dense"])
@pytest.mark.parametrize("renormalize", [True, False])
def test_dispatch_equals_per_token_loop(dispatch, renormalize):
    torch.manual_seed(2)
    m = MoELayer(D, E, K, DFF, renormalize=renormalize, dispatch=dispatch).double()
    x = torch.randn(33, D, dtype=torch.float64)
    with torch.no_grad():
        got, ref = m(x), _naive(m, x, renormalize)
    assert torch.allclose(got.y, ref, rtol=0, atol=1e-12)
    s = got.topk_weights.sum(-1)
    if renormalize:
        assert torch.allclose(s, torch.ones_like(s), atol=1e-14)
    else:
        assert (s < 1).all()


def test_aux_loss_equals_transformers_and_hand_computation():
    torch.manual_seed(3)
    logits = torch.randn(50, E)
    ref = mixtral.load_balancing_loss_func((logits,), num_experts=E, top_k=K)
    ours = load_balancing_loss(logits, k=K)
    assert abs(ours.item() - ref.item()) < 1e-6
    # hand computation: E · Σ_e f_e P_e with f_e = (#top-K hits on e)/T, P_e = mean prob
    p = torch.softmax(logits.double(), -1)
    idx = torch.topk(p, K, -1).indices
    hand = sum((idx == e).sum().item() / 50 * p[:, e].mean().item() for e in range(E)) * E
    assert abs(ours.item() - hand) < 1e-6
    assert abs(load_balancing_loss(logits, k=K, per_slot=True).item() - hand / K) < 1e-6
    # uniform router: loss = K exactly (Mixtral form), 1 in the per-slot (Switch) form
    uni = torch.zeros(E * 4, E)
    uni_idx = torch.arange(E * 4 * K).reshape(E * 4, K) % E
    assert abs(load_balancing_loss(uni, uni_idx).item() - K) < 1e-6
    # masked tokens are excluded exactly as transformers does it
    mask = (torch.rand(5, 10) > 0.3).long()
    ref_m = mixtral.load_balancing_loss_func((logits,), E, K, attention_mask=mask)
    assert abs(load_balancing_loss(logits, k=K, mask=mask).item() - ref_m.item()) < 1e-6
    # multi-layer pooling = transformers' tuple form
    l2 = torch.randn(50, E)
    ref2 = mixtral.load_balancing_loss_func((logits, l2), E, K)
    assert abs(pool_layers([logits, l2], K).item() - ref2.item()) < 1e-6


def test_layer_aux_loss_matches_its_router_logits():
    torch.manual_seed(4)
    m = MoELayer(D, E, K, DFF)
    out = m(torch.randn(2, 20, D))
    ref = mixtral.load_balancing_loss_func((out.router_logits.detach(),), E, K)
    assert abs(out.aux_loss.item() - ref.item()) < 1e-6


def test_gradients_reach_router_and_experts():
    torch.manual_seed(5)
    m = MoELayer(D, E, K, DFF)
    x = torch.randn(30, D)
    out = m(x)
    (out.y.square().mean() + 0.01 * out.aux_loss).backward()
    g = m.router.proj.weight.grad
    assert g is not None and g.abs().sum() > 0
    assert m.experts.w_down.grad.abs().sum() > 0
    # the aux loss alone drives the router through P_e (f_e is piecewise constant):
    # finite differences in float64 with the top-K assignment held fixed
    m = m.double()
    x = x.double()
    m.zero_grad()
    w = m.router.proj.weight
    idx0 = m.route(x).topk_idx

    def aux():
        return load_balancing_loss(m.router.proj(x), idx0)

    aux().backward()
    ga = w.grad.clone()
    dirn = torch.randn_like(w)
    eps = 1e-6
    with torch.no_grad():
        w += eps * dirn
        lp = aux().item()
        w -= 2 * eps * dirn
        lm = aux().item()
        w += eps * dirn
    fd = (lp - lm) / (2 * eps)
    assert ga.abs().sum() > 0
    assert math.isclose((ga * dirn).sum().item(), fd, rel_tol=1e-6, abs_tol=1e-9)


def test_param_count_closed_form():
    m = MoELayer(64, 8, 2, 128)
    assert m.n_params() == expected_params(64, 8, 128) == 8 * 64 + 8 * 3 * 64 * 128


def test_module_apply_still_works():
    # nn.Module.apply must not be shadowed by the dispatch method
    m = MoELayer(8, 4, 2, 8)
    seen = []
    assert m.apply(seen.append) is m
    assert seen[-1] is m and len(seen) == len(list(m.modules()))
