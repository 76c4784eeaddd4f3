"""The CPU popcount path of methods/rabitqcache/rabitq.py (binary keys × INT4 query read straight
from packed words) against the unpacking reference `kernels.rabitq.rabitq_scores_ref` and a
direct integer computation: the integer dot ⟨b, q_u⟩ exact (D not a multiple of 64 or 32
included, padding bits not counted), the estimates equal to the reference (bit for bit: the same
fp32 operations on the same exact dot), the word layout and packing round trips."""
import numpy as np
import pytest
import torch

from kernels import rabitq as K
from methods.rabitqcache import rabitq as R

DIMS = [1, 8, 31, 32, 33, 40, 63, 64, 65, 96, 100, 127, 128, 130, 200, 256]


def _random(h, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    bits = torch.rand(h, n, d, generator=g) > 0.5
    qu = torch.randint(0, 16, (h, d), generator=g, dtype=torch.uint8)
    return bits, qu, g


def _dot_direct(bits, qu):
    """⟨b, q_u⟩ in int64 from the unpacked bits."""
    return (bits.long() * qu.long()[:, None, :]).sum(-1)


@pytest.mark.parametrize("d", DIMS + [4400])    # 15·4400 > 2^16 − 1: the int32 accumulator
def test_integer_dot_is_exact(d):
    bits, qu, _ = _random(3, 70, d, d)
    bits[0, 0] = True              # all ones (every word's top bit, the int32 sign bit, set)
    bits[0, 1] = False
    qu[1] = 15                     # every bit-plane all ones: ⟨b, q_u⟩ = 15·Σb, up to 15·D
    codes = K.pack_bits_ref(bits)
    want = _dot_direct(bits, qu)
    for dtype in (torch.int32, torch.float32):
        got = R.binary_int4_dot(codes, qu, dtype)
        assert got.dtype == dtype and torch.equal(got.long(), want)
    # the unpacking reference's float matmul gives the same integers
    ref_dot = torch.bmm(K.unpack_bits_ref(codes)[..., :d].float(), qu.float().unsqueeze(-1)).squeeze(-1)
    assert torch.equal(ref_dot.long(), want)
    assert int(R.binary_int4_dot(codes[:1, :1], qu[1:2]).item()) == 15 * d


@pytest.mark.parametrize("d", [1, 8, 40, 65, 100, 130])
def test_padding_bits_do_not_count(d):
    """Key words with every bit past D set to 1 (not what pack_bits_ref writes) give the same dot:
    the query's bit-planes are zero there."""
    bits, qu, _ = _random(2, 33, d, 100 + d)
    codes = K.pack_bits_ref(bits)
    w = codes.shape[-1]
    pad = torch.zeros(32 * w, dtype=torch.uint8)
    pad[d:] = 1
    dirty = codes | K.pack_bits_ref(pad)
    assert (d % 32 == 0) or not torch.equal(dirty, codes)
    assert torch.equal(R.binary_int4_dot(dirty, qu).long(), _dot_direct(bits, qu))


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_chunking_does_not_change_the_result(chunk):
    """Blocks of keys (the last one partial, or one key per block) give the same integers and
    the same estimates."""
    bits, qu, g = _random(3, 101, 96, 7)
    codes = K.pack_bits_ref(bits)
    got = R.binary_int4_dot(codes, qu, torch.int32, chunk=chunk)
    assert torch.equal(got.long(), _dot_direct(bits, qu))
    kfac, qfac = _factors(bits, qu, g)
    assert torch.equal(R.rabitq_scores_popcount(codes, qu, kfac, qfac, 0.3, chunk=chunk),
                       K.rabitq_scores_ref(codes, qu, kfac, qfac, 0.3))


def _factors(bits, qu, g):
    h, n, _ = bits.shape
    kfac = torch.stack([torch.rand(h, n, generator=g) * 3 + 0.5, bits.sum(-1).float(),
                        torch.randn(h, n, generator=g)], -1)
    qfac = torch.stack([torch.rand(h, generator=g) * 0.2 + 0.01, -torch.rand(h, generator=g),
                        qu.float().sum(-1), torch.randn(h, generator=g)], -1)
    return kfac, qfac


@pytest.mark.parametrize("d", [8, 40, 64, 96, 128, 130])
@pytest.mark.parametrize("scale", [1.0, 0.125, 0.3])
def test_scores_equal_the_unpacking_reference(d, scale):
    """Same estimate as rabitq_scores_ref: within the kernel test's tolerance (rel. 1e-5), and in
    fact bit for bit (the dot is exact in fp32 in both, the affine is the same fp32 ops)."""
    bits, qu, g = _random(4, 257, d, 1000 + d)
    kfac, qfac = _factors(bits, qu, g)
    codes = K.pack_bits_ref(bits)
    ref = K.rabitq_scores_ref(codes, qu, kfac, qfac, scale)
    got = R.rabitq_scores_popcount(codes, qu, kfac, qfac, scale)
    assert got.dtype == torch.float32 and got.shape == ref.shape
    assert float((got - ref).abs().max() / ref.abs().max()) < 1e-5
    assert torch.equal(got, ref)


def test_shape_errors_as_the_reference():
    codes = torch.zeros(2, 4, 2, dtype=torch.int32)
    for d in (32, 65):
        with pytest.raises(ValueError):
            R.rabitq_scores_popcount(codes, torch.zeros(2, d, dtype=torch.uint8), torch.zeros(2, 4, 3),
                                     torch.zeros(2, 4), 1.0)


@pytest.mark.parametrize("shape", [((2, 3), (2, 3)), ((5, 1), (5,)), ((1, 4), (3, 4))])
def test_method_estimate_uses_popcount_and_equals_the_old_path(shape, monkeypatch):
    """estimate_int4 (the method's scorer on CPU) against the old route through the unpacking
    reference, with the lead-dimension broadcasting the attention ([B, H]) and the estimator
    statistics ([M] queries × [M, 1] one-key caches) use."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    klead, qlead = shape
    d, n = 64, 45
    g = torch.Generator().manual_seed(3)
    k = torch.randn(*klead, n, d, generator=g) + 0.3
    q = torch.randn(*qlead, d, generator=g)
    rot = R.random_rotation(d, g)
    c_k, c_q = k.mean(-2), torch.randn(*klead, d, generator=g) * 0.1
    kc = R.encode_keys(k, rot, c_k, c_q)
    qs = R.prepare_query(q, rot, c_q if qlead == klead else torch.zeros(d), c_k if qlead == klead else torch.zeros(d))
    calls = []
    orig = R.rabitq_scores_popcount
    monkeypatch.setattr(R, "rabitq_scores_popcount", lambda *a: calls.append(1) or orig(*a))
    est = R.estimate_int4(qs, kc)
    assert calls, "the CPU path must be the popcount scorer"
    lead = torch.broadcast_shapes(kc.codes.shape[:-2], qs.qu.shape[:-1])
    w = kc.codes.shape[-1]
    old = K.rabitq_scores_ref(kc.codes.expand(*lead, n, w).reshape(-1, n, w), qs.qu.expand(*lead, d).reshape(-1, d),
                              kc.kfac.expand(*lead, n, 3).reshape(-1, n, 3), qs.qfac.expand(*lead, 4).reshape(-1, 4),
                              1.0).reshape(*lead, n)
    assert torch.equal(est, old)     # (the estimate itself is checked against faiss in test_estimator.py)


@pytest.mark.parametrize("d", DIMS)
def test_packing_round_trip_and_word_layout(d):
    """bits → pack_bits_ref (int32) → popcount_words (zero-copy uint64, or uint32 for odd W) →
    unpack_bits64 gives the bits back; an independent numpy packbits packer (pack_bits64) gives
    the same uint64 words; pack_bits64 → unpack_bits64 round-trips; bits past D are zero."""
    bits, _, _ = _random(2, 9, d, 50 + d)
    codes = K.pack_bits_ref(bits)
    words = R.popcount_words(codes)
    w32 = codes.shape[-1]
    assert words.dtype == (np.uint64 if w32 % 2 == 0 else np.uint32)
    assert np.shares_memory(words, codes.numpy())                      # a view, no copy
    assert torch.equal(R.unpack_bits64(words, d), bits.to(torch.uint8))
    p64 = R.pack_bits64(bits)
    assert p64.dtype == np.uint64 and p64.shape == (2, 9, -(-d // 64))
    assert torch.equal(R.unpack_bits64(p64, d), bits.to(torch.uint8))
    full = R.unpack_bits64(p64, 64 * p64.shape[-1])
    assert not full[..., d:].any()
    if w32 % 2 == 0:
        assert np.array_equal(words, p64)
    # word-level layout: bit i of uint64 word k is dimension 64k + i
    one = torch.zeros(d, dtype=torch.bool)
    one[d - 1] = True
    k, i = divmod(d - 1, 64)
    assert int(R.pack_bits64(one)[k]) == 1 << i


@pytest.mark.parametrize("d", [8, 40, 64, 100, 128])
def test_query_planes_match_the_kernel_layout(d):
    """The numpy bit-planes of q_u are kernels.rabitq.query_planes's words in popcount layout."""
    _, qu, _ = _random(3, 1, d, 7 * d)
    want = R.popcount_words(K.query_planes(qu))
    got = R._query_planes(qu, want.dtype)
    assert got.dtype == want.dtype and np.array_equal(got, want)
