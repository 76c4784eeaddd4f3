"""Independent numerics of the LFQ baselines and objective (against reference libraries and closed forms): RTN against torch's
fake-quantize ops, GPTQ against a direct column-by-column implementation of the paper's update
and against RTN, LFQ's loss against F.kl_div + entropy, and the packed files against the model."""
import torch
import torch.nn.functional as F

from kernels import quant as kq
from methods.lfq.gptq import gptq_quantize
from methods.lfq.ptq import _head_loss, soft_ce
from methods.lfq.quantizer import LWCLinear, fake_quant, group_params, rtn


def _rtn_weights(w, bits, g):
    c, h, z = rtn(w, bits, g)
    return kq.dequantize_ref(c, h, z, g), h, z


def test_rtn_equals_torch_fake_quantize_per_channel():
    torch.manual_seed(0)
    for bits, g in [(2, 32), (3, 32), (4, 64)]:
        w = torch.randn(16, 128) * 0.05
        ours, h, z = _rtn_weights(w, bits, g)
        theirs = torch.fake_quantize_per_channel_affine(
            w.reshape(-1, g), h.flatten(), z.flatten().to(torch.int32), 0, 0, 2 ** bits - 1).reshape_as(w)
        assert torch.equal(ours, theirs)
        # the differentiable fake-quant (used by LWC) is the same function in the forward pass
        assert torch.equal(fake_quant(w, h, z, bits, g), theirs)


def test_rtn_equals_torch_fake_quantize_per_tensor():
    torch.manual_seed(1)
    w = torch.randn(1, 256)
    ours, h, z = _rtn_weights(w, 3, 256)  # one group = the whole tensor
    theirs = torch.fake_quantize_per_tensor_affine(w, float(h), int(z), 0, 7)
    assert torch.equal(ours, theirs)


def test_lwc_at_init_large_is_rtn_and_learns():
    torch.manual_seed(2)
    lin = torch.nn.Linear(64, 8, bias=False)
    q = LWCLinear(lin, 3, 32)
    with torch.no_grad():
        q.gamma.fill_(40.0)
        q.beta.fill_(40.0)  # σ(40) = 1 in float32: no clipping
    h, z = q.params()
    h0, z0 = group_params(lin.weight.detach(), 3, 32)
    torch.testing.assert_close(h, h0, rtol=0, atol=0)
    q.gamma.data.fill_(4.0)
    q.beta.data.fill_(4.0)
    x = torch.randn(5, 64)
    (q(x) - lin(x)).pow(2).mean().backward()
    assert q.gamma.grad.abs().sum() > 0 and q.beta.grad.abs().sum() > 0


def _direct_gptq(w, hess, bits, g, percdamp):
    """GPTQ paper eqs. (OBQ, one column at a time): quantize column q; spread its error
    δ = −(w_q − quant(w_q))/[H⁻¹]_qq · H⁻¹_{q,:} over the remaining columns; remove q from the
    inverse, H⁻¹ ← H⁻¹ − H⁻¹_{:,q} H⁻¹_{q,:} / [H⁻¹]_qq. Group parameters at each group's first
    column, from the current weights."""
    w, hess = w.double().clone(), hess.double().clone()
    k = w.shape[1]
    hess += percdamp * hess.diag().mean() * torch.eye(k, dtype=torch.double)
    hinv = torch.linalg.inv(hess)
    q_all = torch.zeros_like(w)
    for col in range(k):
        if col % g == 0:
            h, z = group_params(w[:, col:col + g], bits, g)
            h, z = h[:, 0], z[:, 0]
        q = torch.clamp(torch.round(w[:, col] * (1.0 / h)) + z, 0, 2 ** bits - 1)
        q_all[:, col] = q
        err = (w[:, col] - (q - z) * h) / hinv[col, col]
        w -= err[:, None] * hinv[col, :][None, :]
        hinv = hinv - torch.outer(hinv[:, col], hinv[col, :]) / hinv[col, col]
    return q_all


def _layer(n=12, k=64, samples=256, seed=3):
    torch.manual_seed(seed)
    w = torch.randn(n, k)
    x = torch.randn(samples, k) @ torch.randn(k, k) * 0.3  # correlated inputs: GPTQ has work to do
    return w, x, 2 * x.t().double() @ x.double() / samples


def test_gptq_matches_direct_obq_update():
    w, _, hess = _layer()
    for block in (16, 32, 128):  # lazy batches of several sizes give the same codes
        codes, _, _ = gptq_quantize(w, hess, 3, 16, block_size=block, percdamp=0.01)
        ref = _direct_gptq(w, hess, 3, 16, 0.01)
        mismatch = (codes.double() != ref).float().mean().item()
        assert mismatch <= 1 / 768, (block, mismatch)  # ≤ 1 code in 768: float round-off at ties


def test_gptq_reconstruction_below_rtn():
    w, x, hess = _layer(n=32, k=128, samples=512, seed=4)
    for act_order in (False, True):
        for bits in (2, 3, 4):
            c, h, z = gptq_quantize(w, hess, bits, 32, act_order=act_order)
            w_gptq = kq.dequantize_ref(c, h, z, 32)
            w_rtn, _, _ = _rtn_weights(w, bits, 32)
            err = lambda wq: float(((x @ (w - wq).t()) ** 2).sum())  # noqa: E731
            assert err(w_gptq) < 0.9 * err(w_rtn), (act_order, bits, err(w_gptq), err(w_rtn))


def test_lfq_objective_is_kl_plus_entropy():
    torch.manual_seed(5)
    zq, zf = torch.randn(37, 11) * 3, torch.randn(37, 11) * 3
    p = F.softmax(zf, -1)
    kl = F.kl_div(F.log_softmax(zq, -1), p, reduction="batchmean")
    entropy = -(p * F.log_softmax(zf, -1)).sum(-1).mean()
    torch.testing.assert_close(soft_ce(zq, zf) / 37, kl + entropy, rtol=1e-6, atol=1e-6)
    assert abs(float(soft_ce(zf, zf) / 37 - entropy)) < 1e-6  # KL = 0 at z^Q = z^FP


def test_chunked_logit_loss_equals_unchunked():
    torch.manual_seed(6)
    norm, head = torch.nn.LayerNorm(16), torch.nn.Linear(16, 50, bias=False)
    y_fp = torch.randn(70, 16)
    grads = {}
    for chunk in (7, 256):
        for objective in ("lfq", "headmse"):
            y = torch.randn(70, 16, generator=torch.Generator().manual_seed(7)).requires_grad_(True)
            val = _head_loss(objective, y, y_fp, norm, head, chunk)
            grads[(chunk, objective)] = (val, y.grad.clone())
    for objective in ("lfq", "headmse"):
        v1, g1 = grads[(7, objective)]
        v2, g2 = grads[(256, objective)]
        assert abs(v1 - v2) < 1e-5
        torch.testing.assert_close(g1, g2, rtol=1e-5, atol=1e-7)
