"""A tiny Llama-style decoder with a selectable normalisation scheme (SiameseNorm,
arXiv 2602.08064; equations as in the official code, github.com/Qwen-Applications/SiameseNorm).

Shared by every scheme: token embedding tied to the LM head, RoPE (transformers' `rotate_half`
convention: the head dim is split into two halves, not interleaved pairs), causal multi-head
attention via `F.scaled_dot_product_attention`, SwiGLU FFN, RMSNorm with a gain initialised
to 1 (affine parameters initialised to the identity, as in the official code).

`norm_scheme` (the MODEL_TYPE names of the official repository's README):
- "pre":        x = x + F(RMSNorm(x)) per sub-layer; final RMSNorm.            (baseline)
- "post":       x = RMSNorm(x + F(x)) per sub-layer; no final norm (the last
                sub-layer's output is already normalised).                      (baseline)
- "post_pre":   Variant A (DeiT/DiT code of the official repo), two streams x, y with c_l = sqrt(2(l+1)).
- "hybrid_pre": Variant B (`OLMo_model_hybrid_pre.py`; attention input x*c1 + LN(y) with HybridNorm-style per-head
                Q/K RMSNorm; FFN sub-layer as in Variant A); `hybrid_attn_norm=True` selects
                the code's "attn_norm flag on" path h = LN_attn(x) + LN_attn_y(y).
"siamese" is accepted as an alias of "post_pre" (the sweep's scheme name).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel, initialization as init
from transformers.modeling_outputs import CausalLMOutput

from methods.core.models import ModelConfig, register_arch
from methods.core.nn import RMSNorm

NORM_SCHEMES = ("pre", "post", "post_pre", "hybrid_pre")
ALIASES = {"siamese": "post_pre", "siamese_post_pre": "post_pre", "siamese_hybrid_pre": "hybrid_pre"}
TWO_STREAM = ("post_pre", "hybrid_pre")


class SiameseNormConfig(PretrainedConfig):
    model_type = "icml26_siamesenorm"

    def __init__(self, vocab_size=64, hidden_size=64, intermediate_size=172, num_hidden_layers=3,
                 num_attention_heads=4, num_key_value_heads=None, max_position_embeddings=128,
                 rms_norm_eps=1e-5, rope_theta=10000.0, initializer_range=0.02,
                 norm_scheme="pre", hybrid_attn_norm=False, tie_word_embeddings=True, **kw):
        norm_scheme = ALIASES.get(norm_scheme, norm_scheme)
        if norm_scheme not in NORM_SCHEMES:
            raise ValueError(f"norm_scheme must be one of {NORM_SCHEMES} (or {sorted(ALIASES)}), got {norm_scheme!r}")
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} not divisible by num_attention_heads {num_attention_heads}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.initializer_range = initializer_range
        self.norm_scheme = norm_scheme
        self.hybrid_attn_norm = hybrid_attn_norm
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kw)


def rotate_half(x):
    # transformers' convention: (x1, x2) -> (-x2, x1) over the two halves of the head dim
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(positions, head_dim: int, theta: float, dtype):
    """cos/sin of shape (..., T, head_dim): frequency i repeated in both halves (HF layout)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
    ang = positions.to(torch.float64)[..., None] * inv
    emb = torch.cat((ang, ang), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, c: SiameseNormConfig, qk_norm: bool):
        super().__init__()
        d, self.nh, self.nkv = c.hidden_size, c.num_attention_heads, c.num_key_value_heads
        self.hd = d // self.nh
        self.q_proj = nn.Linear(d, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, d, bias=False)
        # variant B: HybridNorm-style per-head Q/K norms: one RMSNorm over head_dim, shared by
        # the heads, applied after the projection and before RoPE
        self.q_norm = RMSNorm(self.hd, c.rms_norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.hd, c.rms_norm_eps) if qk_norm else None

    def forward(self, h, cos, sin, mask):
        B, T, _ = h.shape
        q = self.q_proj(h).view(B, T, self.nh, self.hd)
        k = self.k_proj(h).view(B, T, self.nkv, self.hd)
        v = self.v_proj(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.nkv != self.nh:
            k = k.repeat_interleave(self.nh // self.nkv, dim=1)
            v = v.repeat_interleave(self.nh // self.nkv, dim=1)
        if mask is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class SwiGLU(nn.Module):
    def __init__(self, c: SiameseNormConfig):
        super().__init__()
        d, f = c.hidden_size, c.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Block(nn.Module):
    """One layer l (0-indexed): attention then FFN sub-layer, each combined per `norm_scheme`.
    Two-stream schemes carry (x, y); single-stream ones carry (x, None)."""

    def __init__(self, c: SiameseNormConfig, layer_idx: int):
        super().__init__()
        d, eps, s = c.hidden_size, c.rms_norm_eps, c.norm_scheme
        self.scheme = s
        self.hybrid_attn_norm = c.hybrid_attn_norm
        self.attn = Attention(c, qk_norm=(s == "hybrid_pre"))
        self.mlp = SwiGLU(c)
        # official code: c_l = sqrt(2 * (l + 1)), the same constant for both sub-layers of layer l
        self.c = math.sqrt(2 * (layer_idx + 1))

        def norms(*names):
            return nn.ModuleDict({n: RMSNorm(d, eps) for n in names})

        if s in ("pre", "post"):
            self.attn_norms, self.ffn_norms = norms("ln"), norms("ln")
        elif s == "post_pre":
            # variant A: 3 norms per sub-layer (post, pre, in)
            self.attn_norms, self.ffn_norms = norms("post", "pre", "in"), norms("post", "pre", "in")
        else:  # hybrid_pre
            # variant B attention: LN_attn_y(y) plus either the learnable per-channel c1 (flag
            # off, init 1) or LN_attn(x) (flag on); FFN: LN_ff (post), LN_ff_y (pre), LN_ff_in (in)
            self.attn_norms = norms("pre", "post") if c.hybrid_attn_norm else norms("pre")
            self.c1 = None if c.hybrid_attn_norm else nn.Parameter(torch.ones(d))
            self.ffn_norms = norms("post", "pre", "in")

    def _sublayer(self, which, fn, x, y):
        n = self.attn_norms if which == "attn" else self.ffn_norms
        s = self.scheme
        if s == "pre":                       # x = x + F(LN(x))
            return x + fn(n["ln"](x)), None
        if s == "post":                      # x = LN(x + F(x))
            return n["ln"](x + fn(x)), None
        if s == "hybrid_pre" and which == "attn":
            # variant B: h = x*c1 + LN_attn_y(y) (flag on: LN_attn(x) + LN_attn_y(y));
            # x = x + att/c, y = y + att
            base = n["post"](x) if self.hybrid_attn_norm else x * self.c1
            r = fn(base + n["pre"](y))
            return x + r / self.c, y + r
        # variant A (and B's FFN): u = LN_post(x); z = LN_in(u + LN_pre(y)); r = F(z);
        # x = u + r / c_l; y = y + r
        u = n["post"](x)
        r = fn(n["in"](u + n["pre"](y)))
        return u + r / self.c, y + r

    def forward(self, x, y, cos, sin, mask):
        x, y = self._sublayer("attn", lambda h: self.attn(h, cos, sin, mask), x, y)
        return self._sublayer("ffn", self.mlp, x, y)


class SiameseNormModel(nn.Module):
    def __init__(self, c: SiameseNormConfig):
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Block(c, i) for i in range(c.num_hidden_layers))
        d, eps = c.hidden_size, c.rms_norm_eps
        # final norms: pre -> 1; post -> 0; two-stream -> LN_final(LN_a(x) + LN_b(y)), 3 (official code)
        self.norm = RMSNorm(d, eps) if c.norm_scheme != "post" else None
        if c.norm_scheme in TWO_STREAM:
            self.norm_x, self.norm_y = RMSNorm(d, eps), RMSNorm(d, eps)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        c = self.config
        B, T = input_ids.shape
        x = self.embed_tokens(input_ids)
        # official code: x = y = embed(tokens), the stream duplicated
        y = x if c.norm_scheme in TWO_STREAM else None
        if position_ids is None:
            position_ids = torch.arange(T, device=input_ids.device)[None]
        cos, sin = rope_cos_sin(position_ids, c.hidden_size // c.num_attention_heads, c.rope_theta, x.dtype)
        cos, sin = cos[:, None], sin[:, None]              # broadcast over heads
        mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            keys = attention_mask.bool()[:, None, None, :]
            # a query always sees itself, so fully padded rows give no NaN (their output is unused)
            mask = causal & (keys | torch.eye(T, dtype=torch.bool, device=x.device))
        for layer in self.layers:
            x, y = layer(x, y, cos, sin, mask)
        if c.norm_scheme in TWO_STREAM:
            return self.norm(self.norm_x(x) + self.norm_y(y))
        return self.norm(x) if self.norm is not None else x


class SiameseNormForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = SiameseNormConfig
    base_model_prefix = "model"
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _no_split_modules = ["Block"]

    def __init__(self, config: SiameseNormConfig):
        super().__init__(config)
        self.model = SiameseNormModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, RMSNorm):
            init.ones_(module.weight)
        elif isinstance(module, Block) and module.scheme == "hybrid_pre" and module.c1 is not None:
            init.ones_(module.c1)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kw):
        # no KV cache: every step re-runs the whole prefix (tiny models only)
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, input_ids, attention_mask=None, labels=None, position_ids=None, **kw):
        h = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            # HF convention: labels are the inputs; position t predicts token t+1
            loss = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(),
                                   ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)


def build_siamese_model(cfg: ModelConfig, tokenizer, seed: int, norm_scheme: str,
                        hybrid_attn_norm: bool = False) -> SiameseNormForCausalLM:
    """A freshly initialised model from the zoo's `ModelConfig`; the init depends on `seed`."""
    torch.manual_seed(seed)
    conf = SiameseNormConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads, max_position_embeddings=cfg.max_seq_len,
        rms_norm_eps=cfg.norm_eps, rope_theta=cfg.rope_theta, initializer_range=cfg.init_std,
        tie_word_embeddings=cfg.tie_embeddings, norm_scheme=norm_scheme,
        hybrid_attn_norm=hybrid_attn_norm, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    return SiameseNormForCausalLM(conf)


def expected_num_params(c: SiameseNormConfig) -> int:
    """Closed form (tied embeddings, MHA): V·d + L(4d² + 3·d·d_ff) + norm gains, where the
    gains are (2L+1)d (pre), 2Ld (post), (6L+3)d (post_pre, i.e. pre + (4L+2)d, claim C4) and
    L(5d + 2·d_head) + 3d (hybrid_pre: c1 or LN_attn, LN_attn_y, q/k norms, 3 FFN norms)."""
    d, L, f, V = c.hidden_size, c.num_hidden_layers, c.intermediate_size, c.vocab_size
    kv = c.num_key_value_heads * (d // c.num_attention_heads)
    base = V * d * (1 if c.tie_word_embeddings else 2) + L * (2 * d * d + 2 * d * kv + 3 * d * f)
    gains = {"pre": (2 * L + 1) * d, "post": 2 * L * d, "post_pre": (6 * L + 3) * d,
             "hybrid_pre": L * (5 * d + 2 * (d // c.num_attention_heads)) + 3 * d}[c.norm_scheme]
    return base + gains


register_arch(SiameseNormConfig, SiameseNormForCausalLM)
