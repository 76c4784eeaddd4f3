"""The DAG-MoE LM: closed-form sizes and FLOPs, the zero-edge identity at model level, the
checkpoint round trip through the Auto classes, and the aux loss in the objective."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForCausalLM

from methods.core.models import ModelConfig
from methods.dag_moe.aggregate import AggregatedMoE
from methods.dag_moe.model import (
    ArchConfig,
    DagMoEForCausalLM,
    MoEConfig,
    build,
    dag_moe_config,
    flops_per_token,
    moe_loss,
    param_counts,
)

torch.set_num_threads(1)

M = ModelConfig(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_seq_len=32)
CARD = {  # the tiny architectures
    "moe_sum": ArchConfig(8, 2, 128, "sum"), "moe_fine": ArchConfig(16, 4, 64, "sum"),
    "dag_moe": ArchConfig(8, 2, 128, "dag"), "dag_moe_K4": ArchConfig(16, 4, 64, "dag"),
}
V = 60


MOE = {"edge_bias_init": 0.0, "edge_weight_init_std": 0.0, "edge_mode": "soft", "dispatch": "sorted",
       "router_renormalize": True, "aux_loss_coef": 1e-2}


def _cfg(arch, model=M, **moe):
    return dag_moe_config(model, arch, MoEConfig(**{**MOE, **moe}), V, 0, 1)


@pytest.mark.parametrize("name", sorted(CARD))
def test_param_counts_match_the_module_and_the_card(name):
    c = _cfg(CARD[name])
    model = build(c, 0)
    pc = param_counts(c)
    assert pc["total"] == sum(p.numel() for p in model.parameters())
    # active: the N−K unused experts of every layer removed, counted from the real tensors
    a = CARD[name]
    per_expert = sum(p[0].numel() for n, p in model.named_parameters() if ".experts.w_" in n) // M.n_layers
    assert per_expert == 3 * 64 * a.d_ff
    assert pc["active"] == pc["total"] - M.n_layers * (a.n_experts - a.k) * per_expert
    # planned sizes: ~0.45M total / ~0.13M active; generator 65 (K=2) and 390 (K=4) per layer
    assert 0.42e6 <= pc["total"] <= 0.45e6 and 0.13e6 <= pc["active"] <= 0.14e6
    assert pc["generator"] == {"moe_sum": 0, "moe_fine": 0, "dag_moe": 2 * 65, "dag_moe_K4": 2 * 390}[name]


def test_param_counts_untied_gqa():
    m = ModelConfig(d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=64, max_seq_len=16,
                    tie_embeddings=False)
    c = _cfg(ArchConfig(6, 3, 48, "dag"), m)
    assert param_counts(c)["total"] == sum(p.numel() for p in build(c, 0).parameters())


@pytest.mark.parametrize("agg,k,n", [("sum", 2, 8), ("dag", 2, 8), ("dag", 4, 16), ("sum", 4, 16)])
def test_moe_layer_matmul_flops_match_flop_counter(agg, k, n):
    c = _cfg(ArchConfig(n, k, 64, agg))
    torch.manual_seed(0)
    layer = AggregatedMoE(64, n, k, 64, agg, dispatch="sorted")
    x = torch.randn(3, 11, 64)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        layer(x)
    # torch lowers round 2's one-term contraction A_12·o_1 to an elementwise multiply, which
    # FlopCounterMode does not count; the closed form counts it (2·d per token)
    uncounted = 2 * 64 if agg == "dag" else 0
    assert fc.get_total_flops() == 33 * (flops_per_token(c, 32)["moe_matmul"] - uncounted)


def test_flop_overhead_closed_form_card_shapes():
    # K=4, d=64, d_ff=64: Δ = generator 2·64·6 + messages 2·64·6 + 6 sigmoids + 3·64 adds
    base, dag = (flops_per_token(_cfg(CARD[a]), 32) for a in ("moe_fine", "dag_moe_K4"))
    assert dag["moe_layer"] - base["moe_layer"] == 768 + 768 + 6 + 192
    assert dag["model"] - base["model"] == 2 * (768 + 768 + 6 + 192)
    base2, dag2 = (flops_per_token(_cfg(CARD[a]), 32) for a in ("moe_sum", "dag_moe"))
    assert dag2["moe_layer"] - base2["moe_layer"] == 128 + 128 + 1 + 64


@pytest.mark.parametrize("dispatch,atol", [("rounds", 0.0), ("sorted", 1e-5)])
@pytest.mark.parametrize("arch", ["dag_moe", "dag_moe_K4"])
def test_dag_lm_with_zero_edges_equals_sum_lm(dispatch, atol, arch):
    # A ≡ 0 gives the standard top-K MoE; at model level with shared weights
    dag = build(_cfg(CARD[arch], dispatch=dispatch, edge_bias_init=-1e4), 0).eval()
    sum_arch = ArchConfig(CARD[arch].n_experts, CARD[arch].k, CARD[arch].d_ff, "sum")
    plain = build(_cfg(sum_arch, dispatch=dispatch), 1).eval()
    missing, unexpected = plain.load_state_dict(dag.state_dict(), strict=False)
    assert missing == [] and all(".generator." in k for k in unexpected) and len(unexpected) == 4
    x = torch.randint(0, V, (3, 17))
    with torch.no_grad():
        a, b = dag(input_ids=x), plain(input_ids=x)
    assert all(torch.equal(r["edges"], torch.zeros_like(r["edges"])) for r in dag.routing())
    assert torch.allclose(a.logits, b.logits, rtol=0, atol=atol)
    assert torch.allclose(a.aux_loss, b.aux_loss, rtol=0, atol=1e-7)
    if atol == 0.0:
        assert torch.equal(a.logits, b.logits)


def test_nonzero_edges_change_the_output():
    dag = build(_cfg(CARD["dag_moe"], dispatch="rounds", edge_bias_init=0.0), 0).eval()
    plain = build(_cfg(ArchConfig(8, 2, 128, "sum"), dispatch="rounds"), 1).eval()
    plain.load_state_dict(dag.state_dict(), strict=False)
    x = torch.randint(0, V, (2, 9))
    with torch.no_grad():
        diff = (dag(input_ids=x).logits - plain(input_ids=x).logits).abs().max()
    e = dag.routing()[0]["edges"]
    assert torch.allclose(e[:, 0, 1], torch.full_like(e[:, 0, 1], 0.5), atol=1e-7)  # b_a = 0, W_a = 0
    assert diff > 1e-3


@pytest.mark.parametrize("arch", ["dag_moe", "dag_moe_K4", "moe_sum"])
def test_save_from_pretrained_round_trip(tmp_path, arch):
    model = build(_cfg(CARD[arch], edge_weight_init_std=0.1, edge_bias_init=-1.0), 3).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is DagMoEForCausalLM
    assert loaded.config.aggregation == CARD[arch].aggregation and loaded.config.moe_k == CARD[arch].k
    sa, sb = model.state_dict(), loaded.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    x = torch.randint(0, V, (2, 13))
    with torch.no_grad():
        a, b = model(input_ids=x), loaded(input_ids=x)
    # same weights; the generator's (E × d) GEMV may run a different SIMD path on the loaded
    # (mmap-offset, unaligned) tensor: ~1 ulp per layer, never a routing change
    tol = 0.0 if CARD[arch].aggregation == "sum" else 1e-6
    assert torch.allclose(a.logits, b.logits, rtol=0, atol=tol)
    assert torch.allclose(a.aux_loss, b.aux_loss, rtol=0, atol=1e-6)
    for ra, rb in zip(model.routing(), loaded.routing()):
        assert torch.equal(ra["topk_idx"], rb["topk_idx"])
        if ra["edges"] is not None:
            assert torch.allclose(ra["edges"], rb["edges"], rtol=0, atol=1e-6)


def test_fresh_init_follows_the_config():
    model = build(_cfg(CARD["dag_moe_K4"], edge_bias_init=-2.0), 0)
    g = model.model.layers[1].mlp.block.generator.proj
    assert torch.equal(g.weight, torch.zeros_like(g.weight))
    assert torch.equal(g.bias, torch.full_like(g.bias, -2.0))
    ex = model.model.layers[0].mlp.block.moe.experts
    assert abs(float(ex.w_gate.std()) - 64 ** -0.5) < 0.01  # fan-in init of methods.core.moe


def _hand_aux(router_logits, k):
    """E · Σ_e f_e P_e with f = share of top-k slots on e (Σ f = K), P = mean softmax."""
    p = torch.softmax(router_logits.double(), -1)
    T, E = p.shape
    idx = p.topk(k, -1).indices
    f = torch.zeros(E, dtype=torch.float64)
    for t in range(T):
        for e in idx[t]:
            f[e] += 1.0 / T
    return E * (f * p.mean(0)).sum()


def test_aux_loss_enters_the_training_loss():
    model = build(_cfg(CARD["dag_moe"], aux_loss_coef=0.5), 0)
    ids = torch.randint(0, V, (4, 12))
    batch = {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}
    loss = moe_loss(model, batch)
    out = model(input_ids=batch["input_ids"])
    ce = F.cross_entropy(out.logits.flatten(0, 1), batch["labels"].flatten())
    aux = sum(_hand_aux(r, 2) for r in out.router_logits) / len(out.router_logits)
    assert abs(float(out.aux_loss) - float(aux)) < 1e-6
    assert abs(float(loss) - float(ce + 0.5 * aux)) < 1e-5
    # the router's gradient changes with α (through P; f is piecewise constant)
    grads = []
    for coef in (0.0, 0.5):
        model.config.aux_loss_coef = coef
        model.zero_grad()
        moe_loss(model, batch).backward()
        grads.append(model.model.layers[0].mlp.block.moe.router.proj.weight.grad.clone())
    assert (grads[0] - grads[1]).abs().max() > 1e-6
