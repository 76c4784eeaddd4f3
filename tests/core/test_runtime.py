"""The runtime spec: device/dtype resolution, and that model loads, training and lm-eval put the
model where the spec says (CUDA mocked: a GPU job must not run its model on the CPU)."""
import json

import pytest
import torch

from methods.core import runtime
from methods.core.models import ModelConfig, build_model, load_model, save_model
from methods.core.results import InputError
from methods.core.tokenizer import train_tokenizer
from methods.core.train import TrainConfig, train


@pytest.fixture(autouse=True)
def _fresh_runtime():
    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture
def fake_cuda(monkeypatch):
    """A machine that says it has a bf16-capable GPU; nothing is actually moved there."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda *a, **k: None)


@pytest.fixture
def tiny():
    tok = train_tokenizer(["0123456789+=. abc\n"], "char")
    cfg = ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=16)
    return tok, cfg


def test_auto_resolves_to_cpu_fp32_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rt = runtime.resolve(runtime.RuntimeSpec(device="auto", dtype="auto"))
    assert rt.device == torch.device("cpu") and rt.compute_dtype == torch.float32
    assert rt.weight_dtype(training=True) == rt.weight_dtype(training=False) == torch.float32


def test_auto_resolves_to_cuda_bf16_with_fp32_master_weights(fake_cuda):
    rt = runtime.resolve(runtime.RuntimeSpec(device="auto", dtype="auto"))
    assert rt.device.type == "cuda" and rt.compute_dtype == torch.bfloat16
    assert rt.weight_dtype(training=True) == torch.float32      # master weights
    assert rt.weight_dtype(training=False) == torch.bfloat16    # inference loads in bf16
    no_master = runtime.resolve(runtime.RuntimeSpec(device="auto", dtype="auto", master_fp32=False))
    assert no_master.weight_dtype(training=True) == torch.bfloat16


def test_pre_ampere_gpu_gets_fp32(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert runtime.resolve(runtime.RuntimeSpec(device="auto", dtype="auto")).compute_dtype == torch.float32


@pytest.mark.parametrize("spec,msg", [
    ('{"device": "gpu"}', "runtime.device"),
    ('{"dtype": "int8"}', "runtime.dtype"),
    ('{"devise": "cpu"}', "unknown config key 'runtime.devise'"),
    ('{"device": ', "not valid JSON"),
])
def test_bad_spec_is_one_line_error(spec, msg):
    with pytest.raises(InputError, match=msg):
        runtime.activate(spec)


def test_cuda_requested_without_cuda_is_an_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="CUDA is not available"):
        runtime.activate({"device": "cuda"})


def test_activate_exports_spec_to_children():
    runtime.activate({"device": "cpu", "dtype": "bf16", "seed": 3})
    assert json.loads(runtime.os.environ[runtime.ENV])["dtype"] == "bf16"
    runtime._ACTIVE = None                       # a child process: only the environment
    assert runtime.current().compute_dtype == torch.bfloat16


def test_load_model_asks_for_the_gpu_in_bf16(fake_cuda, monkeypatch, tiny, tmp_path):
    """load_model puts the weights straight on the runtime's GPU, in the inference dtype, or
    in fp32 when loaded for training."""
    import transformers

    tok, cfg = tiny
    save_model(build_model(cfg, tok, 0), tok, tmp_path / "m")
    calls = []
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(path, **kw):
        calls.append(kw)
        return real(path, **{k: v for k, v in kw.items() if k != "device_map"})

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    runtime.activate({"device": "auto", "dtype": "auto"})
    load_model(tmp_path / "m")
    load_model(tmp_path / "m", training=True)
    assert calls[0]["device_map"] == "cuda" and calls[0]["dtype"] == torch.bfloat16
    assert calls[1]["device_map"] == "cuda" and calls[1]["dtype"] == torch.float32


def test_train_places_model_and_batches_on_the_gpu(fake_cuda, monkeypatch, tiny):
    """train() moves the model to the runtime device in fp32 (master weights) and every batch
    after it, and computes the loss under bf16 autocast on that device type."""
    tok, cfg = tiny
    model = build_model(cfg, tok, 0)
    moved, batches, autocasts = [], [], []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: (moved.append(k), self)[1])
    monkeypatch.setattr(runtime.Runtime, "to_device", lambda self, b: (batches.append(self.device), b)[1])
    real_autocast = runtime.Runtime.autocast

    def spy_autocast(self, training=True):
        ctx = real_autocast(self, training)
        autocasts.append((getattr(ctx, "device", None), getattr(ctx, "fast_dtype", None)))
        return torch.autocast("cpu", enabled=False)  # the CPU cannot run a cuda autocast

    monkeypatch.setattr(runtime.Runtime, "autocast", spy_autocast)
    runtime.activate({"device": "auto", "dtype": "auto"})
    ids = torch.randint(0, len(tok), (2, 9), generator=torch.Generator().manual_seed(0))
    train(model, lambda s: {"input_ids": ids[:, :-1], "labels": ids[:, 1:]},
          TrainConfig(steps=2, batch_size=2, lr=1e-3, log_every=1))
    assert moved[0] == {"device": torch.device("cuda"), "dtype": torch.float32}
    assert batches == [torch.device("cuda")] * 2
    assert autocasts == [("cuda", torch.bfloat16)] * 2


def test_bf16_autocast_training_keeps_fp32_master_weights_and_tracks_fp32(tiny):
    """On CPU, bf16 compute with fp32 master weights: parameters stay fp32 and the loss curve
    follows the fp32 run's to bf16 precision (relative 2e-2 after 20 steps)."""
    tok, cfg = tiny
    ids = torch.randint(0, len(tok), (4, 13), generator=torch.Generator().manual_seed(1))
    tcfg = TrainConfig(steps=20, batch_size=4, lr=3e-3, log_every=1)
    losses = {}
    for dtype in ("fp32", "bf16"):
        runtime.activate({"device": "cpu", "dtype": dtype})
        model = build_model(cfg, tok, 0)
        rows = train(model, lambda s: {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}, tcfg)
        assert all(p.dtype == torch.float32 for p in model.parameters())
        losses[dtype] = torch.tensor([r["loss"] for r in rows])
    assert not torch.equal(losses["fp32"], losses["bf16"])      # autocast really ran in bf16
    torch.testing.assert_close(losses["bf16"], losses["fp32"], rtol=2e-2, atol=0)


def test_run_lm_eval_places_model_in_inference_dtype(fake_cuda, monkeypatch, tiny, tmp_path):
    """run_lm_eval moves the in-memory model to the runtime device and dtype before lm-eval
    (HFLM ignores its own device/dtype for a model object)."""
    import lm_eval
    from lm_eval.models import huggingface

    from methods.core import evaluate

    tok, cfg = tiny
    model = build_model(cfg, tok, 0)
    moved = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: (moved.append(k), self)[1])
    monkeypatch.setattr(huggingface, "HFLM", lambda **kw: kw)
    monkeypatch.setattr(lm_eval, "simple_evaluate", lambda **kw: {"results": {}})
    runtime.activate({"device": "auto", "dtype": "auto"})
    evaluate.run_lm_eval(model, tok, ["t"], tmp_path, batch_size="auto")
    assert moved[0] == {"device": torch.device("cuda"), "dtype": torch.bfloat16}
