"""Optimizers against torch.optim, exact state bytes, and sparsity counting on constructed updates."""
import pytest
import torch

from methods.rl_sgd import optim, sparsity
from methods.rl_sgd.model import TinyConfig, TinyLM, n_params, round_to_bf16


@pytest.mark.parametrize("name,ref", [
    ("adamw", lambda p: torch.optim.AdamW(p, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    ("adam_nomom", lambda p: torch.optim.AdamW(p, lr=1e-2, betas=(0.0, 0.999), eps=1e-8, weight_decay=0.01)),
    ("sgd", lambda p: torch.optim.SGD(p, lr=1e-2)),
    ("sgd_mom", lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)),
    ("adam_noadapt", lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, dampening=0.9)),
])
def test_matches_torch_optim(name, ref):
    torch.manual_seed(0)
    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    ours, theirs = optim.make(name, [a], 1e-2, weight_decay=0.0 if name == "adam_noadapt" else 0.01), ref([b])
    w = torch.linspace(-2, 2, 24, dtype=torch.float64).view(6, 4)
    for t in range(1, 7):
        for x, o in ((a, ours), (b, theirs)):
            o.zero_grad()
            (x.sin() * w).sum().backward()
            o.step()
        if name == "adam_noadapt":
            # torch's dampened momentum starts from b₁ = g and has no bias correction; compare
            # on the first step only, where both equal θ − η g
            break
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name,per_param", [("sgd", 0), ("adamw", 8), ("adam_nomom", 8), ("sgd_mom", 4),
                                            ("adam_noadapt", 4)])
def test_state_bytes_exact(name, per_param):
    m = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24))
    o = optim.make(name, m.parameters(), 1e-3)
    sum(p.sum() for p in m.parameters()).backward()
    o.step()
    assert optim.state_bytes(o) == per_param * n_params(m)


def _base():
    return {"blocks.0.q_proj.weight": torch.ones(8, 8), "blocks.0.mlp_norm.weight": torch.ones(8),
            "embed.weight": torch.full((4, 8), 0.5)}


def test_changed_fraction_bf16_vs_fp32_constructed():
    base = _base()
    new = {k: v.clone() for k, v in base.items()}
    q = new["blocks.0.q_proj.weight"].view(-1)
    q[:10] += 1e-4            # < half a bf16 ulp at 1.0 (2^-8): invisible in bf16, visible in fp32
    q[10:13] += 0.01          # > one bf16 ulp: visible in both
    new["embed.weight"][0, 0] = 0.75
    r = sparsity.analyse(base, new)
    assert r["n_params"] == 64 + 8 + 32
    assert r["per_tensor"]["blocks.0.q_proj.weight"]["bf16"] == 3
    assert r["per_tensor"]["blocks.0.q_proj.weight"]["fp32"] == 13
    assert r["bf16_changed"] == pytest.approx(4 / 104)
    assert r["fp32_changed"] == pytest.approx(14 / 104)
    assert r["hidden_bf16_changed"] == pytest.approx(3 / 64)
    assert r["per_category"]["embedding"]["bf16_changed"] == pytest.approx(1 / 32)
    assert r["per_category"]["norm"]["fp32_changed"] == 0.0


def test_rank_of_constructed_updates():
    u, v = torch.randn(8, 1), torch.randn(1, 8)
    r1 = sparsity.effective_rank(u @ v)
    assert r1["rank99"] == 1 and r1["eff_rank"] == pytest.approx(1.0, abs=1e-6)
    r8 = sparsity.effective_rank(torch.eye(8))
    assert r8["rank99"] == 8 and r8["eff_rank"] == pytest.approx(8.0, rel=1e-9)


def test_bf16_rounded_base_is_bf16_exact():
    m = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24))
    round_to_bf16(m)
    for p in m.parameters():
        assert torch.equal(p.to(torch.bfloat16).float(), p)


def test_matched_ratio_interpolates_and_takes_the_largest():
    import pandas as pd

    from methods.rl_sgd.analysis import matched_ratio

    adamw = pd.DataFrame({"lr": [1e-5, 3e-5], "acc": [0.50, 0.60], "bf16_changed": [0.40, 0.80]})
    sgd = pd.DataFrame({"lr": [1e-3, 3e-3, 1e-2], "acc": [0.55, 0.61, 0.30], "bf16_changed": [0.10, 0.30, 0.9]})
    ratio, detail = matched_ratio(sgd, adamw, 0.02)
    # 0.55 → AdamW 0.60 (midpoint) → 1/6; 0.61 (within tol above) → end point 0.80 → 0.375; 0.30 unmatched
    assert detail[0]["ratio"] == pytest.approx(0.10 / 0.60)
    assert detail[1]["ratio"] == pytest.approx(0.30 / 0.80)
    assert detail[2] == {"sgd_lr": 1e-2, "sgd_acc": 0.30, "matched": False}
    assert ratio == pytest.approx(0.375)
    assert matched_ratio(sgd[sgd.acc < 0.4], adamw, 0.02)[0] is None
