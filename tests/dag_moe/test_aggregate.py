"""DAG-MoE aggregation (inferred design): degenerate case, acyclicity, hand-computed case, sizes."""
import math

import pytest
import torch
import torch.nn.functional as F

from methods.core.moe import MoELayer
from methods.dag_moe.aggregate import (
    AggregatedMoE,
    StructureGenerator,
    generator_params,
    n_binary_structures,
    n_labelled_dags,
)

torch.set_num_threads(1)


def _pair(d, n_exp, k, d_ff, dispatch, seed=0, dtype=torch.float32, **gen):
    """A DAG layer and a plain MoELayer sharing router and expert weights."""
    torch.manual_seed(seed)
    dag = AggregatedMoE(d, n_exp, k, d_ff, "dag", dispatch=dispatch, **gen).to(dtype)
    plain = MoELayer(d, n_exp, k, d_ff, dispatch=dispatch).to(dtype)
    plain.load_state_dict(dag.moe.state_dict())
    return dag, plain


@pytest.mark.parametrize("dispatch", ["rounds", "dense"])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_zero_edges_equal_plain_topk_moe_exactly(dispatch, k):
    # A ≡ 0 (e.g. W_a = 0, b_a = −1e4) gives the standard top-K MoE (must hold exactly)
    dag, plain = _pair(16, 8, k, 32, dispatch, edge_bias_init=-1e4)
    x = torch.randn(4, 9, 16)
    with torch.no_grad():
        a, b = dag(x), plain(x)
    assert torch.equal(a.extras["edges"], torch.zeros(36, k, k))
    assert torch.equal(a.y, b.y)
    assert torch.equal(a.expert_out, b.expert_out)
    assert torch.equal(a.aux_loss, b.aux_loss) and torch.equal(a.topk_idx, b.topk_idx)


@pytest.mark.parametrize("k", [2, 4])
def test_zero_edges_one_shot_sorted_dispatch_equal_up_to_gemm_rounding(k):
    # "sorted" batches all K slots of an expert into one GEMM, the DAG one GEMM per round:
    # same maths, different float rounding (documented in methods.core.moe)
    dag, plain = _pair(16, 8, k, 32, "sorted", edge_bias_init=-1e4)
    x = torch.randn(4, 9, 16)
    with torch.no_grad():
        a, b = dag(x), plain(x)
    assert torch.equal(a.extras["edges"], torch.zeros(36, k, k))
    assert torch.allclose(a.y, b.y, rtol=0, atol=1e-6)


def test_sum_aggregation_is_plain_moe():
    torch.manual_seed(1)
    agg = AggregatedMoE(16, 6, 2, 24, "sum")
    plain = MoELayer(16, 6, 2, 24)
    plain.load_state_dict(agg.moe.state_dict())
    x = torch.randn(25, 16)
    with torch.no_grad():
        assert torch.equal(agg(x).y, plain(x).y)
    assert agg.overhead_params() == 0


@pytest.mark.parametrize("edge_mode", ["soft", "hard_st"])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_edges_acyclic_in_round_order(edge_mode, k):
    torch.manual_seed(2)
    gen = StructureGenerator(12, k, edge_bias_init=0.3, weight_init_std=1.0, edge_mode=edge_mode)
    A = gen(torch.randn(50, 12))
    assert A.shape == (50, k, k)
    # strictly upper-triangular in round order: j -> k only if j < k
    assert torch.equal(torch.tril(A), torch.zeros_like(A))
    upper = A[:, *torch.triu_indices(k, k, 1)]
    if edge_mode == "soft":
        assert (upper > 0).all() and (upper < 1).all()  # every forward edge present (soft)
    else:
        assert set(upper.detach().unique().tolist()) <= {0.0, 1.0}
    # nilpotent => no directed cycle of any length
    P = torch.linalg.matrix_power((A.detach() != 0).double(), k)
    assert torch.equal(P, torch.zeros_like(P))


def _swiglu(Wg, Wu, Wd, v):
    """Scalar-loop SwiGLU from the definition: Wd (silu(Wg v) ⊙ Wu v)."""
    def mv(W, u):
        return [sum(W[i][j] * u[j] for j in range(len(u))) for i in range(len(W))]
    silu = [g / (1 + math.exp(-g)) for g in mv(Wg, v)]
    h = [s * u for s, u in zip(silu, mv(Wu, v))]
    return mv(Wd, h)


def test_hand_computed_k2_d2():
    # E=3 experts, K=2, d=2, d_ff=2, float64; every quantity recomputed in Python floats
    d, n_exp, k, d_ff = 2, 3, 2, 2
    layer = AggregatedMoE(d, n_exp, k, d_ff, "dag").double()
    Wr = [[1.0, -0.5], [0.2, 0.8], [-1.0, 0.3]]
    Wg = [[[0.5, -0.2], [0.1, 0.4]], [[-0.3, 0.7], [0.6, 0.2]], [[0.2, 0.2], [-0.5, 0.9]]]
    Wu = [[[1.0, 0.3], [-0.4, 0.5]], [[0.2, -0.6], [0.8, 0.1]], [[0.7, 0.0], [0.3, -0.2]]]
    Wd = [[[0.9, -0.1], [0.2, 0.6]], [[-0.5, 0.4], [0.3, 0.3]], [[0.1, 0.8], [-0.7, 0.2]]]
    Wa, ba = [[0.7, -1.2]], [0.25]
    with torch.no_grad():
        layer.moe.router.proj.weight.copy_(torch.tensor(Wr, dtype=torch.float64))
        layer.moe.experts.w_gate.copy_(torch.tensor(Wg, dtype=torch.float64))
        layer.moe.experts.w_up.copy_(torch.tensor(Wu, dtype=torch.float64))
        layer.moe.experts.w_down.copy_(torch.tensor(Wd, dtype=torch.float64))
        layer.generator.proj.weight.copy_(torch.tensor(Wa, dtype=torch.float64))
        layer.generator.proj.bias.copy_(torch.tensor(ba, dtype=torch.float64))
    xs = [[1.0, 0.5], [-0.8, 1.2], [0.3, -1.5]]
    refs = []
    for x in xs:
        z = [sum(w * xi for w, xi in zip(row, x)) for row in Wr]
        s = [math.exp(v) / sum(math.exp(u) for u in z) for v in z]  # s = softmax(W_r x)
        e1, e2 = sorted(range(n_exp), key=lambda e: -s[e])[:2]      # ranked top-2
        g1, g2 = s[e1] / (s[e1] + s[e2]), s[e2] / (s[e1] + s[e2])     # Mixtral renormalisation
        a12 = 1 / (1 + math.exp(-(Wa[0][0] * x[0] + Wa[0][1] * x[1] + ba[0])))
        o1 = _swiglu(Wg[e1], Wu[e1], Wd[e1], x)                      # in_1 = x
        in2 = [x[i] + a12 * o1[i] for i in range(d)]                  # in_2 = x + A12 o_1
        o2 = _swiglu(Wg[e2], Wu[e2], Wd[e2], in2)
        refs.append([g1 * o1[i] + g2 * o2[i] for i in range(d)])      # y = g1 o1 + g2 o2
    with torch.no_grad():
        out = layer(torch.tensor(xs, dtype=torch.float64))
    assert torch.allclose(out.y, torch.tensor(refs, dtype=torch.float64), rtol=0, atol=1e-13)
    # and the chain case: A12 = 1 gives o_2 = E_2(x + E_1(x))
    with torch.no_grad():
        layer.generator.proj.weight.zero_()
        layer.generator.proj.bias.fill_(1e4)
        out = layer(torch.tensor(xs[:1], dtype=torch.float64))
    x = xs[0]
    e1, e2 = out.topk_idx[0].tolist()
    o1 = _swiglu(Wg[e1], Wu[e1], Wd[e1], x)
    o2 = _swiglu(Wg[e2], Wu[e2], Wd[e2], [x[i] + o1[i] for i in range(d)])
    assert torch.allclose(out.expert_out[0], torch.tensor([o1, o2], dtype=torch.float64),
                          rtol=0, atol=1e-13)


@pytest.mark.parametrize("dispatch", ["sorted", "rounds", "dense"])
def test_k3_matches_per_token_reference(dispatch):
    torch.manual_seed(3)
    d, n_exp, k, d_ff = 8, 5, 3, 12
    layer = AggregatedMoE(d, n_exp, k, d_ff, "dag", dispatch=dispatch,
                          weight_init_std=0.5).double()
    x = torch.randn(20, d, dtype=torch.float64)
    with torch.no_grad():
        out = layer(x)
        ex, gen, Wr = layer.moe.experts, layer.generator.proj, layer.moe.router.proj.weight
        for t in range(x.shape[0]):
            s = torch.softmax(Wr @ x[t], -1)
            g, idx = torch.topk(s, k)
            g = g / g.sum()
            a = torch.sigmoid(gen.weight @ x[t] + gen.bias)  # edges (0,1), (0,2), (1,2)
            A = {(0, 1): a[0], (0, 2): a[1], (1, 2): a[2]}
            o = []
            for r in range(k):
                inp = x[t] + sum((A[(j, r)] * o[j] for j in range(r)), torch.zeros(d).double())
                e = idx[r].item()
                o.append(ex.w_down[e] @ (F.silu(ex.w_gate[e] @ inp) * (ex.w_up[e] @ inp)))
            y = sum(gk * ok for gk, ok in zip(g, o))
            assert torch.allclose(out.y[t], y, rtol=0, atol=1e-12)


def test_generator_param_count_closed_form():
    for d, k in [(64, 2), (64, 4), (10, 3), (7, 1)]:
        layer = AggregatedMoE(d, 8 if k < 8 else k, k, 16, "dag")
        closed = k * (k - 1) // 2 * (d + 1)  # W_a (K(K-1)/2 × d) + b_a (K(K-1)/2)
        assert layer.overhead_params() == generator_params(d, k) == closed
        assert sum(p.numel() for p in layer.parameters()) == layer.moe.n_params() + closed
    assert generator_params(64, 2) == 65 and generator_params(64, 4) == 390  # the tiny archs' counts


def test_structure_counts():
    assert [n_binary_structures(k) for k in (2, 3, 4)] == [2, 8, 64]
    assert [n_labelled_dags(n) for n in (1, 2, 3, 4)] == [1, 3, 25, 543]  # OEIS A003024


def test_gradients_reach_generator_router_and_experts():
    torch.manual_seed(4)
    layer = AggregatedMoE(16, 6, 2, 24, "dag")
    out = layer(torch.randn(40, 16))
    (out.y.square().mean() + 0.01 * out.aux_loss).backward()
    for p in (layer.generator.proj.weight, layer.generator.proj.bias,
              layer.moe.router.proj.weight, layer.moe.experts.w_gate):
        assert p.grad is not None and p.grad.abs().sum() > 0
