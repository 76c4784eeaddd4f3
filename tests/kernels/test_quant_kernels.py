"""kernels/quant.py: references against torch's own quantization ops and closed forms, and
every Triton kernel against its reference under TRITON_INTERPRET=1 (in a subprocess, because
Triton reads the variable when the kernels are decorated)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import quant as K

ROOT = Path(__file__).resolve().parents[2]


def _params(w, bits, g):
    wg = w.view(w.shape[0], -1, g)
    scale = ((wg.amax(-1) - wg.amin(-1)) / (2 ** bits - 1)).clamp(1e-5, 1e4)
    return scale, torch.round(-wg.amin(-1) / scale)


@pytest.mark.parametrize("bits,g", [(2, 32), (3, 32), (4, 16), (8, 64)])
def test_reference_equals_torch_fake_quantize(bits, g):
    torch.manual_seed(1)
    w = torch.randn(12, 128)
    scale, zero = _params(w, bits, g)
    ours = K.dequantize_ref(K.quantize_ref(w, scale, zero, bits, g), scale, zero, g)
    # one "channel" per (row, group): torch's per-channel op on the [N·K/g, g] view
    theirs = torch.fake_quantize_per_channel_affine(
        w.view(-1, g), scale.flatten(), zero.flatten().to(torch.int32), 0, 0, 2 ** bits - 1).view_as(w)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_pack_roundtrip_and_density(bits):
    torch.manual_seed(2)
    q = torch.randint(0, 2 ** bits, (7, 64), dtype=torch.uint8)
    p = K.pack_ref(q, bits)
    assert p.dtype == torch.int32 and p.shape == (7, 64 * K.slot_bits(bits) // 32)
    assert torch.equal(K.unpack_ref(p, bits, 64), q)


def test_dequant_matmul_ref_equals_dense():
    torch.manual_seed(3)
    w, x = torch.randn(10, 64), torch.randn(5, 64)
    scale, zero = _params(w, 4, 32)
    q = K.quantize_ref(w, scale, zero, 4, 32)
    y = K.dequant_matmul_ref(x, K.pack_ref(q, 4), scale, zero, 4, 32)
    torch.testing.assert_close(y, x @ K.dequantize_ref(q, scale, zero, 32).t(), rtol=0, atol=0)


@pytest.fixture(scope="module")
def triton_results():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("_triton_vs_ref.py"))], cwd=ROOT,
                         env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_triton_kernels_match_references(triton_results):
    assert triton_results, "no comparisons ran"
    for key, v in triton_results.items():
        if key.startswith(("quantize_mismatch", "pack_mismatch", "unpack_roundtrip")):
            assert v == 0, (key, v)
        elif key.startswith("dequantize_maxabs"):
            assert v == 0.0, (key, v)
        elif key.startswith("dqmm_relerr"):
            assert v < 1e-5, (key, v)  # fp32 accumulation order differs from torch's matmul
        elif key.startswith("dispatch_is_triton"):
            assert v is True, key
