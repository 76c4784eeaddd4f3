"""The judge as a tiny pairwise reward model, plain or with DIBJudge's branches
(arXiv 2603.10351; architecture as in the official code, github.com/AzureStarz/DIBJudge,
`dibjudge/modeling.py`, `bottlenecks.py`, `vq.py`, `proxy_tasks.py`).

Encoder E: token + position embeddings, bidirectional pre-norm transformer over
[prompt ; response]. SFT judge: mean-pooled response states -> MLP -> score.
DIBJudge: robust branch (SwiGLU MLP + RMSNorm -> compression: Gaussian VIB or EMA VQ, per token)
-> pooled z_r -> score; bias branch (3-layer MLP width 2d + RMSNorm, pooled z_b) with proxy heads
(length / NLL / TTR bins, 1-D Wasserstein loss on soft labels) and low-level reconstruction of
the first layer's state statistics; L_dis = mean|cos(z_r, z_b)| + c·mean(C²) with a FIFO queue.
Tiny-scale difference: the official code injects z into a causal judge LM that writes "A"/"B"; here the
score head reads z_r directly (a reward model), so "z-prompt injection" is the score head.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from methods.core.nn import RMSNorm

from .config import ModelConfig

NORM_EPS = 1e-6   # ε of the two RMSNorms; their gain is saved as `w` (state-dict key)


# --- compression operators --------------------------------------------------------------------
def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, sigma²) || N(0, I)) summed over the last dim: ½Σ(μ² + σ² − 1 − log σ²)."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)


class VIB(nn.Module):
    """Per-token Gaussian VIB: LayerNorm -> MLP -> (μ, log σ² clamped to [−5, 5]); z = μ + σ·ε in
    training, μ at eval."""

    def __init__(self, d_in: int, d_z: int):
        super().__init__()
        self.norm = nn.LayerNorm(d_in)
        self.net = nn.Sequential(nn.Linear(d_in, d_in), nn.GELU(), nn.Linear(d_in, 2 * d_z))

    def forward(self, h):
        mu, logvar = self.net(self.norm(h)).chunk(2, -1)
        logvar = logvar.clamp(-5.0, 5.0)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu) if self.training else mu
        return z, gaussian_kl(mu, logvar)


class EMAVectorQuantizer(nn.Module):
    """EMA vector quantiser on centred, L2-normalised inputs: nearest code by squared distance,
    straight-through estimator, loss = β·‖z − sg(q)‖² (the codebook moves by EMA, so its own
    loss term carries no gradient), decay `decay`, codebook initialised by k-means++ seeding on
    the first batch, dead codes (EMA count < 1e-3 of the mean) reset to random inputs.
    Centring: an EMA of the token-feature mean is subtracted before normalising (without it the
    tokens of an untrained branch share one direction, every token takes the same code and the
    judge collapses)."""

    def __init__(self, d: int, n_codes: int, decay: float = 0.99, beta: float = 0.25):
        super().__init__()
        self.decay, self.beta, self.n_codes = decay, beta, n_codes
        self.register_buffer("codebook", F.normalize(torch.randn(n_codes, d), dim=-1))
        self.register_buffer("ema_count", torch.ones(n_codes))
        self.register_buffer("ema_sum", self.codebook.clone())
        self.register_buffer("centre", torch.zeros(d))
        self.register_buffer("initialised", torch.tensor(False))

    @staticmethod
    def nearest(x: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
        """argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2 x·c_k)  (same result as torch.cdist(x, C).argmin(-1))."""
        return (codebook.pow(2).sum(-1) - 2 * x @ codebook.t()).argmin(-1)

    @staticmethod
    def kmeans_pp(x: torch.Tensor, k: int, gen: torch.Generator | None = None) -> torch.Tensor:
        """k-means++ seeding: first centre uniform, then each next ∝ squared distance to the
        nearest chosen centre."""
        idx = [int(torch.randint(len(x), (1,), generator=gen))]
        d2 = (x - x[idx[0]]).pow(2).sum(-1)
        for _ in range(k - 1):
            p = d2.clamp_min(0)
            j = int(torch.multinomial(p / p.sum(), 1, generator=gen)) if p.sum() > 0 else \
                int(torch.randint(len(x), (1,), generator=gen))
            idx.append(j)
            d2 = torch.minimum(d2, (x - x[j]).pow(2).sum(-1))
        return x[idx].clone()

    def forward(self, h: torch.Tensor, mask: torch.Tensor | None = None):
        hv = h.reshape(-1, h.shape[-1]) if mask is None else h.reshape(-1, h.shape[-1])[mask.reshape(-1)]
        if self.training:
            with torch.no_grad():
                m = hv.detach().mean(0)
                if bool(self.initialised):
                    self.centre.mul_(self.decay).add_(m, alpha=1 - self.decay)
                else:
                    self.centre.copy_(m)
        z = F.normalize(h - self.centre, dim=-1)
        flat = z.reshape(-1, z.shape[-1])
        valid = flat if mask is None else flat[mask.reshape(-1)]
        if self.training and not bool(self.initialised):
            with torch.no_grad():
                init = self.kmeans_pp(valid.detach(), self.n_codes)
                self.codebook.copy_(init); self.ema_sum.copy_(init); self.initialised.fill_(True)
        codes = self.nearest(flat.detach(), self.codebook)
        q = self.codebook[codes].view_as(z)
        if self.training:
            with torch.no_grad():
                vc = codes if mask is None else codes[mask.reshape(-1)]
                onehot = F.one_hot(vc, self.n_codes).to(valid.dtype)
                self.ema_count.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.ema_sum.mul_(self.decay).add_(onehot.t() @ valid.detach(), alpha=1 - self.decay)
                n = self.ema_count.sum()
                count = (self.ema_count + 1e-5) / (n + self.n_codes * 1e-5) * n  # Laplace smoothing
                self.codebook.copy_(self.ema_sum / count[:, None])
                dead = self.ema_count < 1e-3 * self.ema_count.mean()
                if dead.any():
                    r = valid[torch.randint(len(valid), (int(dead.sum()),))].detach()
                    self.codebook[dead] = r; self.ema_sum[dead] = r; self.ema_count[dead] = 1.0
        commit = self.beta * (z - q.detach()).pow(2).sum(-1)   # per token
        z_q = z + (q - z).detach()                             # straight-through
        return z_q, commit


# --- dependence ---------------------------------------------------------------------------------
def standardise(x: torch.Tensor) -> torch.Tensor:
    """Column z-scores over the batch, (x − mean) / std with the population std: exact for every
    column whose std is > 0, however small. A constant column (std exactly 0) has no z-score;
    it maps to 0 (its deviations are 0), so its correlations below are 0 and carry no gradient.
    (The official code divides by std.clamp_min(1e-6), the same wherever std ≥ 1e-6.)"""
    d = x - x.mean(0)
    var = d.pow(2).mean(0)
    # the where sits before the sqrt: sqrt'(0) is infinite and would turn a zero gradient into NaN
    return d / torch.where(var > 0, var, torch.ones_like(var)).sqrt()


def cross_correlation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = â^T b̂ / N of batch-standardised a (N×p) and b (N×q): the Pearson correlation of each
    column of a with each column of b (0 where a column is constant, where Pearson's r is undefined)."""
    return standardise(a).t() @ standardise(b) / a.shape[0]


def dis_loss(zr: torch.Tensor, zb: torch.Tensor, c: float, qr=None, qb=None) -> torch.Tensor:
    """Official code's dependence penalty: mean|cos(z_r, z_b)| + c·mean(C²); detached queue rows (qr, qb) enlarge C's batch."""
    cos = F.cosine_similarity(zr, zb, dim=-1).abs().mean()
    if qr is not None and len(qr):
        zr, zb = torch.cat([zr, qr]), torch.cat([zb, qb])
    return cos + c * cross_correlation(zr, zb).pow(2).mean()


def distance_correlation(x: torch.Tensor, y: torch.Tensor) -> float:
    """Székely's (V-statistic) distance correlation of samples x (N×p), y (N×q)."""
    def centred(z):
        d = torch.cdist(z.double(), z.double())
        return d - d.mean(0, keepdim=True) - d.mean(1, keepdim=True) + d.mean()
    A, B = centred(x), centred(y)
    dcov2, vx, vy = (A * B).mean(), (A * A).mean(), (B * B).mean()
    if vx * vy <= 0:
        return 0.0
    return float(torch.sqrt(dcov2.clamp_min(0) / torch.sqrt(vx * vy)))


def wasserstein_1d(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1-D Wasserstein distance between predicted and target bin distributions (unit bin
    spacing): Σ_k |CDF_p(k) − CDF_t(k)|, averaged over the batch."""
    return (logits.softmax(-1).cumsum(-1) - target.cumsum(-1)).abs().sum(-1).mean()


def soft_labels(bins: torch.Tensor, n_bins: int, smooth: float = 0.1) -> torch.Tensor:
    """One-hot bins with `smooth` mass spread to the neighbouring bins (soft labels, as in the official `proxy_tasks.py`)."""
    t = F.one_hot(bins, n_bins).float() * (1 - smooth)
    left, right = (bins - 1).clamp_min(0), (bins + 1).clamp_max(n_bins - 1)
    t.scatter_add_(1, left[:, None], torch.full_like(t[:, :1], smooth / 2))
    t.scatter_add_(1, right[:, None], torch.full_like(t[:, :1], smooth / 2))
    return t


def low_level_stats(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Targets of the low-level reconstruction (official code): per sequence mean, log-variance and a
    4-bin magnitude histogram of the first layer's states over the response tokens."""
    m = mask[..., None].float()
    n = m.sum((1, 2)).clamp_min(1)
    mean = (h * m).sum((1, 2)) / n
    var = ((h - mean[:, None, None]).pow(2) * m).sum((1, 2)) / n
    mag = h.abs()
    hist = [(((mag >= lo) & (mag < hi)).float() * m).sum((1, 2)) / n
            for lo, hi in ((0, 0.5), (0.5, 1), (1, 2), (2, math.inf))]
    return torch.stack([mean, var.clamp_min(1e-6).log(), *hist], -1)


# --- modules ------------------------------------------------------------------------------------
class SwiGLU(nn.Module):
    def __init__(self, d_in, d_h, d_out):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(d_in, d_h), nn.Linear(d_in, d_h), nn.Linear(d_h, d_out)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Encoder(nn.Module):
    def __init__(self, vocab: int, cfg: ModelConfig):
        super().__init__()
        self.tok = nn.Embedding(vocab, cfg.d_model, padding_idx=0)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        # segment / exact-match feature (DrQA-style): 0 prompt, 1 response token that occurs in the
        # prompt, 2 response token that does not (a hallucinated value, or a rare synonym)
        self.seg = nn.Embedding(3, cfg.d_model)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, 0.0,
                                                               batch_first=True, norm_first=True)
                                    for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, ids, seg):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.tok(ids) + self.pos(pos) + self.seg(seg)
        pad = ids == 0
        states = []
        for layer in self.layers:
            h = layer(h, src_key_padding_mask=pad)
            states.append(h)
        return self.norm(h), states[0]


def pool(h, mask):
    m = mask[..., None].float()
    return (h * m).sum(1) / m.sum(1).clamp_min(1)


class Judge(nn.Module):
    """variant: sft | dib_vib | dib_vq | no_dis | no_proxy | no_bottleneck."""

    def __init__(self, vocab: int, cfg: ModelConfig, variant: str, n_bins: dict[str, int]):
        super().__init__()
        self.variant, self.cfg = variant, cfg
        d = cfg.d_model
        self.enc = Encoder(vocab, cfg)
        self.dib = variant != "sft"
        if not self.dib:
            self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
            return
        self.robust = nn.Sequential(SwiGLU(d, 2 * d, d), nn.GELU(), SwiGLU(d, 2 * d, d),
                                    RMSNorm(d, NORM_EPS, param="w"))
        self.bottleneck = {"dib_vq": "vq", "no_bottleneck": "none"}.get(variant, "vib")
        if self.bottleneck == "vib":
            self.comp = VIB(d, cfg.d_z)
        elif self.bottleneck == "vq":
            self.pre_vq = nn.Linear(d, cfg.d_z)
            self.comp = EMAVectorQuantizer(cfg.d_z, cfg.vq_codes, cfg.vq_decay, cfg.vq_beta)
        else:
            self.comp = nn.Linear(d, cfg.d_z)
        self.head = nn.Sequential(nn.Linear(cfg.d_z, d), nn.GELU(), nn.Linear(d, 1))
        self.bias = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, 2 * d), nn.GELU(),
                                  nn.Linear(2 * d, cfg.d_z), RMSNorm(cfg.d_z, NORM_EPS, param="w"))
        self.proxy = nn.ModuleDict({k: nn.Linear(cfg.d_z, n) for k, n in n_bins.items()})
        self.recon = nn.Linear(cfg.d_z, 6)

    def forward(self, ids, seg):
        """Per sequence: score, pooled z_r, pooled z_b, per-sequence compression loss, low-level
        reconstruction targets and predictions."""
        h, h_low = self.enc(ids, seg)
        mask = (seg >= 1) & (ids != 0)
        out = {}
        if not self.dib:
            zr = pool(h, mask)
            out.update(score=self.head(zr).squeeze(-1), zr=zr)
            return out
        r = self.robust(h)
        if self.bottleneck == "vib":
            z, comp = self.comp(r)
        elif self.bottleneck == "vq":
            z, comp = self.comp(self.pre_vq(r), mask)
        else:
            z, comp = self.comp(r), torch.zeros(mask.shape, device=ids.device)
        zr = pool(z, mask)
        zb = pool(self.bias(h), mask)
        out.update(score=self.head(zr).squeeze(-1), zr=zr, zb=zb,
                   comp=(comp * mask).sum(1) / mask.sum(1).clamp_min(1),
                   proxy={k: m(zb) for k, m in self.proxy.items()},
                   recon=self.recon(zb), recon_target=low_level_stats(h_low.detach(), mask))
        return out
