"""The model-level pipeline on a 2-block model: quantized directories load with
`from_pretrained`, their packed file dequantizes to exactly the saved weights, quantized blocks
are on the group grid, and LFQ changes only the final block of its base."""
from dataclasses import replace

import pytest
import torch

from kernels import quant as kq
from methods.core.models import ModelConfig, build_model, load_model
from methods.core.tokenizer import train_tokenizer
from methods.lfq.ptq import LINEARS, QuantConfig, final_block, quantize_model
from methods.lfq.store import load_records, save_quantized

# the quantize step's former defaults, written out (the config classes have none)
QUANT = QuantConfig(bits=3, group_size=32, epochs=10, batch_size=4, lr=1e-2, chunk=256, gptq_block_size=128,
                    gptq_percdamp=0.01, gptq_act_order=False, forward_batch=16, seed=0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    tok = train_tokenizer(["s0123456789 the cat sees a dog."], "char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_seq_len=32), tok, 0)
    model.eval()
    ids = torch.randint(3, len(tok), (8, 16))
    return model, tok, ids, tmp_path_factory.mktemp("lfq")


@pytest.mark.parametrize("method", ["rtn", "gptq", "omni"])
def test_quantized_dir_roundtrip(tiny, method):
    model, tok, ids, tmp = tiny
    cfg = replace(QUANT, bits=3, group_size=16, epochs=1, forward_batch=4)
    q, records, log = quantize_model(model, ids, method, cfg)
    assert len(records) == 2 * len(LINEARS) and len(log) == 2
    out = tmp / method
    save_quantized(q, tok, records, out, 3, 16, {"method": method})
    loaded, _ = load_model(out)
    recs, bits, group = load_records(out)
    assert (bits, group) == (3, 16)
    sd = loaded.state_dict()
    for name, (codes, h16, z) in recs.items():
        w = kq.dequantize_ref(codes, h16.float(), z, group)
        assert torch.equal(w, sd[f"{name}.weight"].float()), name
        assert int(codes.max()) <= 7
    # embeddings / head / norms stay full precision
    assert torch.equal(sd["model.embed_tokens.weight"], model.state_dict()["model.embed_tokens.weight"])
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, q(input_ids=ids).logits, rtol=1e-5, atol=1e-5)


def test_lfq_changes_only_the_final_block(tiny):
    model, tok, ids, _ = tiny
    cfg = replace(QUANT, bits=2, group_size=16, epochs=2, forward_batch=4)
    base, _, _ = quantize_model(model, ids, "rtn", cfg)
    lfq, records, log = final_block(model, base, ids, "lfq", cfg)
    assert set(records) == {f"model.layers.1.{n}" for n in LINEARS}
    sb, sl = base.state_dict(), lfq.state_dict()
    changed = {k for k in sb if not torch.equal(sb[k], sl[k])}
    assert changed and all(k.startswith("model.layers.1.") for k in changed), changed
    assert log["objective"] == "lfq" and log["train_loss"] > 0


@pytest.mark.parametrize("method", ["rtn", "gptq", "omni"])
def test_in_place_quantization_equals_the_copy(tiny, method):
    """The CLI quantizes the loaded model in place (one extra block in memory, not a second
    model); the quantized weights and the final block must equal the copying path's exactly."""
    import copy

    model, tok, ids, _ = tiny
    cfg = replace(QUANT, bits=3, group_size=16, epochs=1, forward_batch=4)
    q_copy, rec_copy, _ = quantize_model(model, ids, method, cfg)
    own = copy.deepcopy(model)
    q_in, rec_in, _ = quantize_model(own, ids, method, cfg, in_place=True)
    assert q_in is own
    for k, v in q_copy.state_dict().items():
        assert torch.equal(v, q_in.state_dict()[k]), k
    assert rec_copy.keys() == rec_in.keys()
    lfq_copy, last_copy, _ = final_block(model, q_copy, ids, "lfq", cfg)
    lfq_in, last_in, _ = final_block(model, q_in, ids, "lfq", cfg, in_place=True)
    assert lfq_in is q_in
    for k, v in lfq_copy.state_dict().items():
        assert torch.equal(v, lfq_in.state_dict()[k]), k


def test_paper_scale_base_is_the_hub_model_as_is(tmp_path):
    """`train_base` with `hub_id` (a local bf16 directory stands in for the hub id) saves that
    model untouched: same tensors, same dtype, no training; an empty hub_id is a named error."""
    import dataclasses

    from methods.core.models import save_model
    from methods.core.results import InputError
    from methods.core.train import TrainConfig
    from methods.lfq.base import train_base
    from methods.lfq.config import BaseConfig

    tok = train_tokenizer(["s0123456789 the cat"], "char")
    hub = build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=32), tok, 3)
    hub = hub.to(torch.bfloat16)
    save_model(hub, tok, tmp_path / "hub")
    cfg = BaseConfig(model=ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=32),
                     train=TrainConfig(steps=300, batch_size=32, lr=3e-3), seq_len=16, val_batches=8,
                     hub_id=str(tmp_path / "hub"), seed=0)
    assert train_base(cfg, tmp_path / "no_data", tmp_path / "out") == {"hub_id": str(tmp_path / "hub")}
    got, _ = load_model(tmp_path / "out", dtype="auto")
    want = hub.state_dict()
    assert {k: v.dtype for k, v in got.state_dict().items()} == {k: torch.bfloat16 for k in want}
    assert all(torch.equal(got.state_dict()[k], v) for k, v in want.items())
    assert not (tmp_path / "out" / "train_log.json").exists()
    with pytest.raises(InputError, match="hub_id"):
        train_base(dataclasses.replace(cfg, hub_id=" "), tmp_path / "no_data", tmp_path / "out2")
