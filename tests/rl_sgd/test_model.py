"""rl_sgd's plain-torch TinyLM against transformers' LlamaForCausalLM: a saved tiny checkpoint
loads with AutoModelForCausalLM and gives the same logits and gradients; bad directories are
refused with one-line errors."""
import json

import pytest
import torch

from methods.core.results import InputError
from methods.rl_sgd import model as M


def _model(seed=0):
    torch.manual_seed(seed)
    m = M.TinyLM(M.TinyConfig(vocab_size=15, d_model=32, n_heads=4, d_ff=48, n_layers=2, max_seq_len=16))
    with torch.no_grad():   # non-trivial norm gains, so a swapped or missing gain would show
        for n, p in m.named_parameters():
            if "norm" in n:
                p.add_(0.2 * torch.randn_like(p))
    return m


def test_saved_checkpoint_is_a_llama_with_the_same_logits_and_gradients(tmp_path):
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    m = _model()
    M.save(m, tmp_path / "m", {"width": 32})
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "m", dtype=torch.float32)
    assert isinstance(hf, LlamaForCausalLM)
    assert set(hf.state_dict()) == set(m.state_dict())
    ids = torch.randint(0, 15, (3, 12), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(m(ids), hf(ids).logits, rtol=1e-5, atol=1e-5)
    # gradients of the same loss agree tensor by tensor
    m(ids).logsumexp(-1).sum().backward()
    hf.train()
    hf(ids).logits.logsumexp(-1).sum().backward()
    hp = dict(hf.named_parameters())
    for n, p in m.named_parameters():
        torch.testing.assert_close(p.grad, hp[n].grad, rtol=1e-4, atol=1e-6)
    # and our loader reads the directory back to the same function
    torch.testing.assert_close(M.load(tmp_path / "m")(ids), m(ids), rtol=0, atol=0)


def test_rope_is_a_rotation_with_relative_scores():
    """q·k after RoPE depends only on the position difference (the property RoPE is built for).
    The angles are float32 (as transformers computes them), hence 1e-6 and not float64 rounding."""
    cos, sin = M.rope_cos_sin(10, 8, "cpu", torch.float64)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    rq = M._rotate(q.expand(10, 8), cos, sin)
    rk = M._rotate(k.expand(10, 8), cos, sin)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(10), rtol=1e-6, atol=1e-6)
    s = rq @ rk.T
    for d in range(1, 4):
        diag = torch.diagonal(s, offset=d)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), rtol=1e-6, atol=1e-6)


def _saved(tmp_path):
    M.save(_model(), tmp_path / "m")
    return tmp_path / "m"


@pytest.mark.parametrize("key,value", [("rms_norm_eps", 1e-6), ("num_key_value_heads", 2),
                                       ("tie_word_embeddings", True), ("model_type", "qwen2")])
def test_refuses_llama_configs_it_does_not_implement(tmp_path, key, value):
    d = _saved(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg[key] = value
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=key):
        M.load(d)


def test_refuses_damaged_directories(tmp_path):
    d = _saved(tmp_path)
    w = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(w[: len(w) // 2])
    with pytest.raises(InputError, match="corrupt model directory"):
        M.load(d)
    (d / "config.json").write_text("{")
    with pytest.raises(InputError, match="corrupt model directory"):
        M.load(d)
    (d / "config.json").unlink()
    with pytest.raises(InputError, match="not a rl_sgd model directory"):
        M.load(d)
