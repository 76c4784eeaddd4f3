"""The CPU int4 path of the packed linear layer (methods/lfq/packed.py) against x @ Ŵᵀ computed
in float64 from the stored codes (Ŵ = (q − z)·s, s the stored fp16 scale), the int4 packing
against the codes (lossless), and the fallback to the previous path for formats the kernel
cannot express.

Error bound of the int4 path (bf16 in, fp32 accumulation, bf16 out; u = 2⁻⁸ is bf16's unit
roundoff, v = 2⁻²⁴ fp32's). The kernel holds q4 = q + c (c the per-group code offset) and sees
x' = x(1 + δ), s' = s(1 + ε) and the zero ζ' = r·s'(1 + η) with r = 8 − c − z, |δ|, |ε|, |η| ≤ u;
it dequantizes Ŵ' = (q4 − 8)s' + ζ' = (q − z)s(1 + ε) + r·s'η, so |Ŵ' − Ŵ| ≤ u(|Ŵ| + |r|s)(1 + u)
(r = 0 for 2/3-bit groups with 0 ≤ z < 2^b). If the kernel holds Ŵ' in bf16 before the product
(it may, for larger M) that adds u|Ŵ'|; an fp32 dequantization adds v|Ŵ'|. Then
|Σ x'Ŵ' − Σ xŴ| ≤ u Σ|x|(3|Ŵ| + |r|s)(1 + O(u)), the fp32 sum of K products adds
≤ (K + 1)v Σ|x'||Ŵ'| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5,
any summation order), and the bf16 output rounding u|ŷ|. With A = Σ_k |x_k|(3|Ŵ_k| + |r_k|s_k):

    |ŷ − y| ≤ 1.05 · (u|y| + u·A + (K + 1)·v·A),

the factor 1.05 covering the O(u) cross terms (≤ 4u ≈ 1.6%). This bound grows with K, so it
cannot see one misplaced code or group at K = 2048; the one-hot test below checks every
dequantized weight on its own (x = e_k, no sum: |ŷ − Ŵ_k| ≤ 1.05 · u · (3|Ŵ_k| + |r_k|s_k)),
and the round-trip test checks the codes exactly.
"""
import pytest
import torch
from safetensors.torch import save_file

from kernels import quant as kq
from methods.lfq.packed import (
    INT4_GROUPS,
    PackedLinear,
    int4_expressible,
    int4_matmul,
    int4_offset,
    int4_pack,
    load_packed_model,
)
from methods.lfq.store import PACKED, load_records, pack_records

U_BF16, U_FP32 = 2.0 ** -8, 2.0 ** -24

# (N, K, group, bits): the tiny DAG's g32 at 2 and 3 bits, the other kernel groups, 4 bits,
# N not a multiple of 16 (padded), and a group whose zero point leaves the int8 range
SHAPES = [(64, 256, 32, 3), (48, 512, 32, 2), (40, 256, 32, 4), (96, 1024, 64, 4), (128, 2048, 128, 3),
          (32, 512, 256, 2)]


def _record(n, k, group, bits, seed=0, far_zero=False):
    """(codes uint8, fp16 scale, integer zero float32) of a random weight on the store's grid
    (asymmetric min/max per group, as RTN / the quantizer's initial clipping)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    if far_zero:  # one row all positive and far from 0: z = round(−min/s) ≪ −128
        w[0] = 50.0 + torch.rand(k, generator=g)
    wg = w.view(n, k // group, group)
    s = ((wg.amax(-1) - wg.amin(-1)) / (2 ** bits - 1)).clamp(1e-5, 1e4).half()
    z = torch.round(-wg.amin(-1) / s.float())
    codes = kq.quantize_ref(w, s.float(), z, bits, group)
    return codes, s, z


def _stored(tmp_path, name, codes, s, z, bits, group):
    """The record as it comes back from a quantized directory's quant.safetensors."""
    d = tmp_path / name
    d.mkdir()
    save_file(pack_records({"lin": (codes, s, z)}, bits), str(d / PACKED),
              metadata={"bits": str(bits), "group_size": str(group), "layout": "kernels.quant"})
    recs, b, gs = load_records(d)
    assert (b, gs) == (bits, group)
    return recs["lin"]


def _decode_int4(wpack, k, n):
    """Codes held by an int4-packed weight, read back through the kernel itself: scale 1 and
    zero 8 make Ŵ = q, and x = I_K gives Ŵᵀ; integers ≤ 15 are exact in bf16."""
    ones = torch.ones(wpack.shape[0], k // 32)
    _, sz = int4_pack(torch.zeros(wpack.shape[0], k, dtype=torch.uint8), ones, torch.zeros_like(ones), 4, 32)
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(torch.eye(k, dtype=torch.bfloat16), wpack, 32, sz)
    return y[:, :n].t().float()


def _dequant64(codes, s, z, group):
    return (codes.double() - z.double().repeat_interleave(group, 1)) * s.double().repeat_interleave(group, 1)


def _abs_terms(w, s, z, bits, group):
    """3|Ŵ| + |r|·s per weight (the bound's A before the sum over x)."""
    r = (8 - int4_offset(z, bits).double() - z.double()).abs()
    return 3 * w.abs() + (r * s.double()).repeat_interleave(group, 1)


@pytest.mark.parametrize("n,k,group,bits", SHAPES)
def test_int4_packing_is_lossless_on_the_stored_codes(tmp_path, n, k, group, bits):
    codes, s, z = _record(n, k, group, bits, seed=1)
    c2, s2, z2 = _stored(tmp_path, "d", codes, s, z, bits, group)
    assert torch.equal(c2, codes)
    lin = PackedLinear(c2, s2, z2, bits, group)
    assert lin.kernel == "int4" and lin.wpack.shape == (n + (-n % 16), k // 2)
    c = int4_offset(z2, bits).repeat_interleave(group, 1)
    assert torch.equal(_decode_int4(lin.wpack, k, n) - c, codes.float())


def test_int4_packing_is_lossless_on_all_sixteen_codes():
    codes = (torch.arange(64 * 256) % 16).view(64, 256).to(torch.uint8)
    codes = codes[:, torch.randperm(256, generator=torch.Generator().manual_seed(0))].contiguous()
    ones = torch.ones(64, 256 // 32)
    wpack, _ = int4_pack(codes, ones, torch.zeros_like(ones), 4, 32)
    assert torch.equal(_decode_int4(wpack, 256, 64), codes.float())


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_code_offset_keeps_codes_in_range_and_zeroes_the_float_zero(bits):
    z = torch.arange(-20, 36).float().view(8, 7)
    c = int4_offset(z, bits)
    assert int(c.min()) >= 0 and int(c.max()) + 2 ** bits - 1 <= 15
    inside = (z >= 0) & (z <= 2 ** bits - 1)
    r = 8 - c - z
    if bits < 4:  # every zero point inside the code range gets float zero exactly 0
        assert (r[inside] == 0).all()
    else:
        assert (c == 0).all()
    codes = torch.full((8, 7 * 32), 2 ** bits - 1, dtype=torch.uint8)
    _, sz = int4_pack(codes, torch.ones(8, 7), z, bits, 32)
    assert torch.equal(sz[..., 1].float().t()[:8], r.float())  # |r| ≤ 28: exact in bf16


@pytest.mark.parametrize("n,k,group,bits", SHAPES)
def test_int4_dequantized_weights_one_by_one(tmp_path, n, k, group, bits):
    codes, s, z = _stored(tmp_path, "d", *_record(n, k, group, bits, seed=2, far_zero=True), bits, group)
    assert z.min() < -128  # the int16 zero point is exercised
    lin = PackedLinear(codes, s, z, bits, group)
    y = lin(torch.eye(k)).double().t()  # [N, K]: row n, column k = Ŵ'_nk
    w = _dequant64(codes, s, z, group)
    assert ((y - w).abs() <= 1.05 * U_BF16 * _abs_terms(w, s, z, bits, group)).all()


@pytest.mark.parametrize("m", [1, 7, 64])
@pytest.mark.parametrize("n,k,group,bits", SHAPES)
def test_int4_matmul_within_the_bf16_bound_of_the_float64_reference(tmp_path, n, k, group, bits, m):
    codes, s, z = _stored(tmp_path, "d", *_record(n, k, group, bits, seed=3, far_zero=True), bits, group)
    lin = PackedLinear(codes, s, z, bits, group)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
    y = lin(x)
    assert y.dtype == torch.float32 and y.shape == (m, n)
    w = _dequant64(codes, s, z, group)
    ref = x.double() @ w.t()
    a = x.double().abs() @ _abs_terms(w, s, z, bits, group).t()
    tol = 1.05 * (U_BF16 * ref.abs() + U_BF16 * a + (k + 1) * U_FP32 * a)
    err = (y.double() - ref).abs()
    assert (err <= tol).all(), float((err / tol).max())
    # and the same numbers with a batch and sequence dimension and a bias
    b = torch.randn(n)
    lin_b = PackedLinear(codes, s, z, bits, group, bias=b)
    torch.testing.assert_close(lin_b(x.view(1, m, k)), (y + b).view(1, m, n), rtol=0, atol=0)


def test_kernel_semantics_as_documented():
    """torch's CPU int4 kernel computes x @ ((q − 8)·scale + zero)ᵀ with qScaleAndZeros
    [K/g, N, 2]: checked on exact small integers (every value exact in bf16 and fp32)."""
    g = torch.Generator().manual_seed(0)
    n, k, group = 16, 64, 32
    q = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32)
    scale = torch.randint(1, 4, (n, k // group), generator=g).float()
    zero = torch.randint(-4, 5, (n, k // group), generator=g).float()
    x = torch.zeros(3, k)  # ±1 at 4 columns per row: |y| ≤ 4·(8·3 + 4) < 256, exact in bf16
    for r in range(3):
        cols = torch.randperm(k, generator=g)[:4]
        x[r, cols] = torch.randint(0, 2, (4,), generator=g).float() * 2 - 1
    wpack = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    sz = torch.stack([scale.t(), zero.t()], -1).bfloat16().contiguous()
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.bfloat16(), wpack, group, sz)
    w = (q.float() - 8) * scale.repeat_interleave(group, 1) + zero.repeat_interleave(group, 1)
    assert float((x @ w.t()).abs().max()) < 256
    assert torch.equal(y.float(), x @ w.t())


def test_formats_the_kernel_cannot_express_keep_the_previous_path():
    assert int4_expressible(3, 32) and int4_expressible(2, 128) and int4_expressible(4, 256)
    assert not int4_expressible(8, 32) and not int4_expressible(3, 16)
    x = torch.randn(5, 64)
    for bits, group in [(8, 32), (3, 16)]:
        codes, s, z = _record(32, 64, group, bits, seed=4)
        lin = PackedLinear(codes, s, z, bits, group)
        assert lin.kernel == "dequant"
        ref = kq.dequant_matmul_ref(x, kq.pack_ref(codes, bits), s.float(), z, bits, group)
        assert torch.equal(lin(x), ref)
        with pytest.raises(ValueError, match="not expressible"):
            PackedLinear(codes, s, z, bits, group, kernel="int4")
    assert set(INT4_GROUPS) == {32, 64, 128, 256}


def test_int4_matmul_is_the_layer():
    codes, s, z = _record(32, 128, 32, 4, seed=5)
    wpack, sz = int4_pack(codes, s.float(), z, 4, 32)
    x = torch.randn(3, 128)
    assert torch.equal(int4_matmul(x, wpack, sz, 32, 32), PackedLinear(codes, s, z, 4, 32)(x))


def test_packed_model_loads_every_stored_linear(tmp_path):
    """A quantized directory with its linears replaced by PackedLinear: on the previous
    (exact fp32) path it equals the saved fake-quantized model to fp32 rounding; on the int4
    path (plumbing check; the layer's bound is tested above) its logits stay within 2% of their
    largest magnitude and the greedy next tokens agree on ≥ 95% of positions."""
    from dataclasses import replace

    from methods.core.models import ModelConfig, build_model, load_model
    from methods.core.tokenizer import train_tokenizer
    from methods.lfq.ptq import QuantConfig, quantize_model
    from methods.lfq.store import save_quantized

    torch.manual_seed(0)
    tok = train_tokenizer(["s0123456789 the cat sees a dog."], "char")
    model = build_model(ModelConfig(d_model=64, n_layers=2, n_heads=2, d_ff=128, max_seq_len=32), tok, 0).eval()
    ids = torch.randint(3, len(tok), (8, 16))
    cfg = QuantConfig(bits=3, group_size=32, epochs=1, batch_size=4, lr=1e-2, chunk=256, gptq_block_size=128,
                      gptq_percdamp=0.01, gptq_act_order=False, forward_batch=4, seed=0)
    q, records, _ = quantize_model(model, ids, "rtn", replace(cfg))
    save_quantized(q, tok, records, tmp_path / "rtn", 3, 32, {"method": "rtn"})
    fake, _ = load_model(tmp_path / "rtn")
    exact, _ = load_packed_model(tmp_path / "rtn", kernel="dequant")
    fast, _ = load_packed_model(tmp_path / "rtn")
    for m, kind in [(exact, "dequant"), (fast, "int4")]:
        layers = [mod for mod in m.modules() if isinstance(mod, PackedLinear)]
        assert len(layers) == len(records) and all(lay.kernel == kind for lay in layers)
    with torch.no_grad():
        ref = fake(input_ids=ids).logits
        torch.testing.assert_close(exact(input_ids=ids).logits, ref, rtol=1e-5, atol=1e-5)
        out = fast(input_ids=ids).logits
    assert float((out - ref).abs().max()) <= 0.02 * float(ref.abs().max())
    assert float((out.argmax(-1) == ref.argmax(-1)).float().mean()) >= 0.95
