"""Run under TRITON_INTERPRET=1 (set by test_kernel.py): the Triton binary × INT4 score kernel
of kernels/rabitq.py against its torch reference on the same inputs; prints one JSON line."""
import json
import os

import torch

assert os.environ.get("TRITON_INTERPRET") == "1"
from kernels import rabitq as K  # noqa: E402

torch.manual_seed(0)
out = {}
# N not a multiple of the block; D = 8 and 96: a partial last word, W = 3 not a power of two
for h, n, d in [(2, 200, 64), (3, 129, 128), (1, 7, 32), (2, 33, 8), (2, 150, 96)]:
    bits = torch.rand(h, n, d) > 0.5
    bits[0, 0] = True          # an all-ones word (bit 31 set: the sign bit of int32)
    bits[0, 1] = False
    codes = K.pack_bits_ref(bits)
    qu = torch.randint(0, 16, (h, d), dtype=torch.uint8)
    qu[0, :32] = 15            # every plane's word 0 has bit 31 set (D ≥ 32)
    kfac = torch.stack([torch.rand(h, n) * 3 + 0.5, bits.sum(-1).float(), torch.randn(h, n)], -1)
    qfac = torch.stack([torch.rand(h) * 0.2 + 0.01, -torch.rand(h), qu.float().sum(-1), torch.randn(h)], -1)
    key = f"h{h}n{n}d{d}"
    ref = K.rabitq_scores_ref(codes, qu, kfac, qfac, 0.125)
    tri = K.rabitq_scores_triton(codes, qu, kfac, qfac, 0.125)
    out[f"relerr_{key}"] = float((ref - tri).abs().max() / ref.abs().max())
    # the integer dot alone: kfac0 = 1, Δ = 1, v_l = Σb = Σq_u = 0 (as passed) → ŝ = 2⟨b,q_u⟩/√D
    unit = torch.stack([torch.ones(h, n), torch.zeros(h, n), torch.zeros(h, n)], -1)
    q1 = torch.stack([torch.ones(h), torch.zeros(h), torch.zeros(h), torch.zeros(h)], -1)
    dot_tri = K.rabitq_scores_triton(codes, qu, unit, q1, 1.0) * d ** 0.5 / 2
    dot_true = (bits.float() * qu.float()[:, None, :]).sum(-1)
    out[f"dot_maxabs_{key}"] = float((dot_tri - dot_true).abs().max())
    out[f"dispatch_is_triton_{key}"] = bool(torch.equal(K.rabitq_scores(codes, qu, kfac, qfac, 0.125), tri))
print(json.dumps(out))
