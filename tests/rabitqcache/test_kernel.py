"""kernels/rabitq.py: the reference against a direct float computation with the dequantized
query (the affine identity of the INT4 path is exact), bit packing, and the Triton kernel
against the reference under TRITON_INTERPRET=1 (in a subprocess: Triton reads the variable
when the kernels are decorated)."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import rabitq as K

ROOT = Path(__file__).resolve().parents[2]


def test_pack_roundtrip_and_layout():
    torch.manual_seed(0)
    bits = (torch.rand(3, 5, 64) > 0.5).to(torch.uint8)
    codes = K.pack_bits_ref(bits)
    assert codes.dtype == torch.int32 and codes.shape == (3, 5, 2)
    assert torch.equal(K.unpack_bits_ref(codes), bits)
    one = torch.zeros(32, dtype=torch.uint8)
    one[31] = 1   # bit 31 is the int32 sign bit
    assert int(K.pack_bits_ref(one)) == -2 ** 31
    one[31], one[3] = 0, 1
    assert int(K.pack_bits_ref(one)) == 8


def test_pack_pads_a_partial_word_with_zeros():
    """D not a multiple of 32 (the stand-in Llama's head_dim 8, or 96): whole words, bits past D zero."""
    torch.manual_seed(1)
    for d in (8, 40, 96):
        bits = (torch.rand(4, d) > 0.5).to(torch.uint8)
        codes = K.pack_bits_ref(bits)
        assert codes.shape == (4, -(-d // 32))
        un = K.unpack_bits_ref(codes)
        assert torch.equal(un[:, :d], bits) and not un[:, d:].any()


@pytest.mark.parametrize("d", [8, 32, 64, 96, 128])
def test_reference_equals_float_dot_with_dequantized_query(d):
    """ŝ = scale·(kfac0·⟨x̄, q̄⟩ + kfac2 + qfac3) with x̄ = (2b−1)/√D, q̄ = Δ·q_u + v_l, computed
    directly in float64: the reference's integer form must agree to fp32 rounding."""
    torch.manual_seed(d)
    h, n = 2, 50
    bits = torch.rand(h, n, d) > 0.5
    qu = torch.randint(0, 16, (h, d), dtype=torch.uint8)
    delta, vl = torch.rand(h) * 0.3 + 0.05, -torch.rand(h)
    kfac = torch.stack([torch.rand(h, n) + 0.5, bits.sum(-1).float(), torch.randn(h, n)], -1)
    qfac = torch.stack([delta, vl, qu.float().sum(-1), torch.randn(h)], -1)
    ours = K.rabitq_scores_ref(K.pack_bits_ref(bits), qu, kfac, qfac, 0.3)
    xbar = (2 * bits.double() - 1) / math.sqrt(d)
    qbar = delta.double()[:, None] * qu.double() + vl.double()[:, None]
    ip = (xbar * qbar[:, None, :]).sum(-1)
    want = 0.3 * (kfac[..., 0].double() * ip + kfac[..., 2].double() + qfac[:, 3].double()[:, None])
    torch.testing.assert_close(ours.double(), want, rtol=1e-5, atol=1e-5)


def test_shape_errors():
    codes = torch.zeros(2, 4, 2, dtype=torch.int32)
    for d in (32, 65):   # W = 2 words hold 33..64 dimensions
        with pytest.raises(ValueError):
            K.rabitq_scores_ref(codes, torch.zeros(2, d, dtype=torch.uint8), torch.zeros(2, 4, 3), torch.zeros(2, 4), 1.0)


@pytest.fixture(scope="module")
def triton_results():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("_triton_vs_ref.py"))], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_triton_kernel_matches_reference(triton_results):
    assert len(triton_results) == 15, triton_results
    for key, v in triton_results.items():
        if key.startswith("relerr"):
            assert v < 1e-5, (key, v)       # the integer dot is exact; fp32 affine order differs
        elif key.startswith("dot_maxabs"):
            assert v < 1e-3, (key, v)       # ⟨b, q_u⟩ ≤ 15·D round-tripped through fp32
        else:
            assert v is True, key
