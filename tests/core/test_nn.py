"""methods.core.nn.RMSNorm against torch.nn.functional.rms_norm and transformers' LlamaRMSNorm,
and the state-dict names and ε of the three models built on it (saved checkpoints keep loading)."""
import pytest
import torch
import torch.nn.functional as F

from methods.core.nn import RMSNorm


@pytest.mark.parametrize("eps", [1e-5, 1e-6])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-14)])
def test_matches_functional_rms_norm(eps, dtype, tol):
    g = torch.Generator().manual_seed(0)
    norm = RMSNorm(24, eps).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(24, generator=g))
    # small inputs, so that ε matters: mean(x²) ≈ 1e-6
    for scale in (1.0, 1e-3):
        x = (torch.randn(3, 5, 24, generator=g) * scale).to(dtype)
        want = F.rms_norm(x, (24,), norm.weight, eps)
        torch.testing.assert_close(norm(x), want, rtol=tol, atol=tol)
    other = 1e-6 if eps == 1e-5 else 1e-5
    assert not torch.allclose(norm(x), F.rms_norm(x, (24,), norm.weight, other), rtol=1e-3, atol=0)


def test_gradients_match_functional_rms_norm():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 16, generator=g, dtype=torch.float64, requires_grad=True)
    norm = RMSNorm(16, 1e-5).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16, generator=g, dtype=torch.float64))
    w = norm.weight.detach().clone().requires_grad_(True)
    up = torch.randn(4, 16, generator=g, dtype=torch.float64)
    (norm(x) * up).sum().backward()
    gx, gw = x.grad.clone(), norm.weight.grad.clone()
    x.grad = None
    (F.rms_norm(x, (16,), w, 1e-5) * up).sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gw, w.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_normalise_in_fp32_like_llama(dtype):
    """Half inputs: normalised in float32, cast back, then the gain (transformers' LlamaRMSNorm)."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    g = torch.Generator().manual_seed(2)
    ours, ref = RMSNorm(32, 1e-5), LlamaRMSNorm(32, eps=1e-5)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(32, generator=g))
        ref.weight.copy_(ours.weight)
    ours, ref = ours.to(dtype), ref.to(dtype)
    x = torch.randn(2, 7, 32, generator=g).to(dtype)
    y = ours(x)
    assert y.dtype == dtype
    torch.testing.assert_close(y, ref(x), rtol=0, atol=0)
    # and within half-precision rounding of the fp32 functional form
    torch.testing.assert_close(y.float(), F.rms_norm(x.float(), (32,), ours.weight.float(), 1e-5),
                               rtol=1e-2, atol=1e-2)


def test_param_name_and_state_dict_roundtrip():
    a, b = RMSNorm(8, 1e-6), RMSNorm(8, 1e-6, param="w")
    assert list(a.state_dict()) == ["weight"] and list(b.state_dict()) == ["w"]
    assert b.w is b._parameters["w"] and "weight" not in dict(b.named_parameters())
    with torch.no_grad():
        b.w.mul_(3.0)
    c = RMSNorm(8, 1e-6, param="w")
    c.load_state_dict(b.state_dict())
    x = torch.randn(2, 8)
    torch.testing.assert_close(c(x), 3 * F.rms_norm(x, (8,), None, 1e-6), rtol=1e-6, atol=1e-6)
    assert "eps=1e-06" in repr(c)


def _norms(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, RMSNorm)}


def test_models_keep_their_eps_and_state_dict_names():
    """rl_sgd's TinyLM (ε 1e-5, `weight`), dibjudge's Judge (ε 1e-6, `w`), siamesenorm (the
    config's rms_norm_eps, `weight`): the names are those their saved checkpoints hold."""
    from methods.core.models import ModelConfig
    from methods.core.tokenizer import train_tokenizer
    from methods.dibjudge.model import Judge, ModelConfig as JudgeConfig
    from methods.rl_sgd.model import TinyConfig, TinyLM
    from methods.siamesenorm.model import build_siamese_model

    tiny = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24, n_layers=1))
    assert {n: m.eps for n, m in _norms(tiny).items()} == {"model.layers.0.input_layernorm": 1e-5,
                                                           "model.layers.0.post_attention_layernorm": 1e-5,
                                                           "model.norm": 1e-5}
    assert {"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
            "model.norm.weight"} <= set(tiny.state_dict())

    judge = Judge(20, JudgeConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, d_z=8, max_len=8, vq_codes=4,
                                  vq_decay=0.99, vq_beta=0.25), "dib_vib", {"a": 2})
    assert {n: m.eps for n, m in _norms(judge).items()} == {"robust.3": 1e-6, "bias.5": 1e-6}
    assert {k for k in judge.state_dict() if k.startswith(("robust.3.", "bias.5."))} == {"robust.3.w", "bias.5.w"}

    tok = train_tokenizer(["abc"], "char")
    siam = build_siamese_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=16,
                                           norm_eps=3e-6), tok, 0, "post_pre")
    norms = _norms(siam)
    assert norms and {m.eps for m in norms.values()} == {3e-6}
    assert all(f"{n}.weight" in siam.state_dict() for n in norms)
