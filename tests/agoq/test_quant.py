"""AGoQ quantizers against hand-computed cases, their stated error bounds, stochastic rounding's
unbiasedness and the int8 gradient buffer's size (claim A4; symmetric divisor 7, see quant.py)."""
import math

import pytest
import torch

from methods.agoq.quangrad import Int8GradBuffer
from methods.agoq.quant import group_dequant, group_quant, pack_codes, sym_dequant, sym_divisor, sym_quant, unpack_codes


def test_asym_2bit_hand_case():
    # min −1, max 2: s = 3 / (2² − 1) = 1, z = round(1) = 1,
    # q = clamp(round(x) + 1) = [0, 1 (round(−0.5) = −0, half to even), 1, 3], x̂ = q − 1
    x = torch.tensor([-1.0, -0.5, 0.25, 2.0])
    p = group_quant(x, 2, group=4)
    assert float(p.scale) == 1.0 and float(p.zero) == 1.0
    assert unpack_codes(p.codes, 2, 4).tolist() == [0, 1, 1, 3]
    assert p.codes.tolist() == [0 | 1 << 2 | 1 << 4 | 3 << 6]  # four 2-bit codes in one byte
    assert group_dequant(p).tolist() == [-1.0, 0.0, 0.0, 2.0]


def test_asym_4bit_exact_grid():
    x = torch.arange(16, dtype=torch.float32) * 0.5 - 2.0  # min −2, max 5.5: s = 7.5/15 = 0.5, z = 4
    p = group_quant(x, 4, group=16)
    assert float(p.scale) == 0.5 and float(p.zero) == 4.0
    assert unpack_codes(p.codes, 4, 16).tolist() == list(range(16))
    assert torch.equal(group_dequant(p), x)
    assert p.codes.numel() == 8 and p.codes[0].item() == 0x10  # code 0 low nibble, code 1 high


def test_pack_layout():
    assert pack_codes(torch.tensor([1, 2, 3, 4]), 4).tolist() == [0x21, 0x43]
    assert pack_codes(torch.tensor([1, 2, 3, 0]), 2).tolist() == [1 + (2 << 2) + (3 << 4)]
    q = torch.randint(0, 16, (1000,))
    assert torch.equal(unpack_codes(pack_codes(q, 4), 4, 1000), q.to(torch.uint8))


def test_sym_4bit_divisor_7_hand_case():
    # divisor 2^(b−1) − 1 = 7 (not the 7.5 some libraries use). max|x| = 3.5 → s = 0.5;
    # x/s = [7, −3.5, 1, 0] → q = [7, −4 (half to even), 1, 0]; x̂ = [3.5, −2, 0.5, 0]
    assert sym_divisor(4) == 7 and sym_divisor(8) == 127
    q, s = sym_quant(torch.tensor([3.5, -1.75, 0.5, 0.0]), bits=4, block=4)
    assert s.tolist() == [0.5]
    assert q.tolist() == [7, -4, 1, 0]
    assert sym_dequant(q, s).tolist() == [3.5, -2.0, 0.5, 0.0]
    # codes never leave [−7, 7]
    q, _ = sym_quant(torch.randn(4096) * 10, bits=4, block=128)
    assert int(q.min()) >= -7 and int(q.max()) <= 7


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_asym_error_bound_half_scale(bits):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(64, 300, generator=g) * torch.logspace(-3, 2, 300)  # wide ranges, a ragged last group
    x[3, 7] = 1e3  # an outlier
    p = group_quant(x, bits, group=128)
    err = (group_dequant(p) - x).abs().reshape(-1)
    n = x.numel()
    s = p.scale.float().repeat_interleave(128)[:n]
    # fp32 rounding of x/s and (q − z)·s adds a few ulps of |x|
    assert bool((err <= s / 2 * (1 + 1e-6) + 1e-6 * x.abs().reshape(-1)).all())


def test_sym_int8_error_bound():
    x = torch.randn(10_000) * torch.linspace(0.01, 50, 10_000)
    q, s = sym_quant(x, 8, 128)
    err = (sym_dequant(q, s, x.numel()) - x).abs()
    assert bool((err <= s.repeat_interleave(128)[: x.numel()] / 2 * (1 + 1e-6) + 1e-6 * x.abs()).all())


def test_stochastic_rounding_unbiased():
    x = torch.tensor([0.1, 0.37, -0.8, 1.0, 0.55, -0.2] * 64)  # 384 = 3 groups of 128
    g = torch.Generator().manual_seed(0)
    n = 4000
    acc = torch.zeros_like(x)
    for _ in range(n):
        acc += group_dequant(group_quant(x, 2, 128, stochastic=True, generator=g))
    s = float(group_quant(x, 2, 128, stochastic=True).scale.float().max())
    # per element the draw's sd ≤ s/2: the mean over n draws is within 5 sd of x
    assert float((acc / n - x).abs().max()) <= 5 * (s / 2) / math.sqrt(n)
    # round-to-nearest is biased on the same input (control)
    assert float((group_dequant(group_quant(x, 2, 128)) - x).abs().max()) > 0.05


def test_int8_grad_buffer_roundtrip_and_size():
    g = torch.randn(128 * 1000) * 1e-3
    buf = Int8GradBuffer.from_tensor(g)
    assert buf.nbytes / g.numel() == 1 + 4 / 128  # claim A4: 1.031 B/param
    assert buf.nbytes / (4 * g.numel()) <= 0.258
    back = buf.to_tensor()
    assert bool(((back - g).abs() <= buf.scales.repeat_interleave(128) / 2 * (1 + 1e-6) + 1e-6 * g.abs()).all())
    # a ragged length stores only n codes
    g2 = torch.randn(1000)
    b2 = Int8GradBuffer.from_tensor(g2)
    assert b2.nbytes == 1000 + 4 * 8
    assert float((b2.to_tensor() - g2).abs().max()) <= float(b2.scales.max()) / 2 * (1 + 1e-6) + 1e-6 * float(g2.abs().max())
