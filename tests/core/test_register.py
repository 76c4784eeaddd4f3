"""A custom architecture registered with the Auto classes loads by `from_pretrained` without
trust_remote_code; the kernel dispatcher picks the reference on CPU."""
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from kernels import use_triton
from methods.core.models import register_arch


class ScaledConfig(LlamaConfig):
    model_type = "icml26_scaled_llama"

    def __init__(self, logit_scale: float = 2.0, **kw):
        self.logit_scale = logit_scale
        super().__init__(**kw)


class ScaledForCausalLM(LlamaForCausalLM):
    config_class = ScaledConfig

    def forward(self, *args, **kw):
        out = super().forward(*args, **kw)
        out.logits = out.logits * self.config.logit_scale
        return out


def test_registered_arch_round_trips(tmp_path):
    register_arch(ScaledConfig, ScaledForCausalLM)
    torch.manual_seed(0)
    cfg = ScaledConfig(vocab_size=20, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, logit_scale=3.0)
    model = ScaledForCausalLM(cfg).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is ScaledForCausalLM and loaded.config.logit_scale == 3.0
    x = torch.randint(0, 20, (2, 5))
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)
        # the custom forward is what runs: 3 × the stock Llama's logits on the same weights
        stock = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.to_dict().items() if k != "logit_scale"}))
        stock.load_state_dict(model.state_dict())
        torch.testing.assert_close(loaded(x).logits, 3.0 * stock.eval()(x).logits, rtol=1e-6, atol=1e-6)


def test_dispatcher_uses_reference_on_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert use_triton(torch.zeros(2)) is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert use_triton(torch.zeros(2)) is True
