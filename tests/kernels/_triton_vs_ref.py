"""Run under TRITON_INTERPRET=1 (set by test_quant_kernels.py): every Triton kernel of
kernels/quant.py against its torch reference on the same inputs; prints one JSON line."""
import json
import os

import torch

assert os.environ.get("TRITON_INTERPRET") == "1"
from kernels import quant as K  # noqa: E402

torch.manual_seed(0)
out = {}
for bits, g, n, k in [(4, 32, 24, 64), (3, 16, 8, 48), (2, 32, 16, 64), (8, 64, 5, 128)]:
    w = torch.randn(n, k)
    wg = w.view(n, k // g, g)
    mx, mn = wg.amax(-1), wg.amin(-1)
    scale = ((mx - mn) / (2 ** bits - 1)).clamp(1e-5, 1e4)
    zero = torch.round(-mn / scale)
    # exact ties (x·(1/s) = m + ½) exercise round-half-even
    w[0, :4] = torch.tensor([0.5, 1.5, 2.5, -0.5]) * scale[0, 0]
    key = f"b{bits}g{g}"
    q_ref, q_tri = K.quantize_ref(w, scale, zero, bits, g), K.quantize_triton(w, scale, zero, bits, g)
    out[f"quantize_mismatch_{key}"] = int((q_ref != q_tri).sum())
    d_ref, d_tri = K.dequantize_ref(q_ref, scale, zero, g), K.dequantize_triton(q_ref, scale, zero, g)
    out[f"dequantize_maxabs_{key}"] = float((d_ref - d_tri).abs().max())
    p_ref, p_tri = K.pack_ref(q_ref, bits), K.pack_triton(q_ref, bits)
    out[f"pack_mismatch_{key}"] = int((p_ref != p_tri).sum())
    out[f"unpack_roundtrip_mismatch_{key}"] = int((K.unpack_ref(p_tri, bits, k) != q_ref).sum())
    x = torch.randn(19, k)  # M not a multiple of the tile
    y_ref = K.dequant_matmul_ref(x, p_ref, scale, zero, bits, g)
    y_tri = K.dequant_matmul_triton(x, p_ref, scale, zero, bits, g)
    out[f"dqmm_relerr_{key}"] = float((y_ref - y_tri).abs().max() / y_ref.abs().max())
    out[f"dispatch_is_triton_{key}"] = bool(torch.equal(K.quantize(w, scale, zero, bits, g), q_tri))
print(json.dumps(out))
