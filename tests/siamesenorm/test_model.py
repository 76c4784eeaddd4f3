"""SiameseNorm model: each scheme against a float64 reference written from the official
code's equations, the Pre-Norm scheme against transformers' Llama, the closed-form parameter counts,
HF save/load and lm-eval loading, and a training sanity check."""
import math

import pytest
import torch

import methods.siamesenorm  # noqa: F401  (registers the Auto classes)
from methods.siamesenorm.model import NORM_SCHEMES, SiameseNormConfig, SiameseNormForCausalLM, rope_cos_sin

torch.set_num_threads(1)
D, L, H, FF, V, T = 16, 3, 2, 24, 37, 9
EPS = 1e-5


def make(scheme, dtype=torch.float64, seed=0, **kw):
    torch.manual_seed(seed)
    c = SiameseNormConfig(vocab_size=V, hidden_size=D, intermediate_size=FF, num_hidden_layers=L,
                          num_attention_heads=H, rms_norm_eps=EPS, norm_scheme=scheme, **kw)
    m = SiameseNormForCausalLM(c).to(dtype).eval()
    with torch.no_grad():   # random weights everywhere, norm gains and c1 included (none at 1)
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.ndim == 2 else 0.5) + (1.0 if p.ndim == 1 else 0.0))
    return m


# ------------------------------------------------------ reference written from the equations
def rms(x, w):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS)


def rope_ref(q, pos):
    """Rotate pair (i, i + hd/2) by angle pos · 10000^(-2i/hd), written per frequency."""
    hd = q.shape[-1]
    out = q.clone()
    for i in range(hd // 2):
        a = pos.double() * 10000.0 ** (-2 * i / hd)                      # (T,)
        c, s = torch.cos(a)[:, None], torch.sin(a)[:, None]
        x1, x2 = q[..., :, i:i + 1], q[..., :, i + hd // 2:i + hd // 2 + 1]
        out[..., :, i:i + 1] = x1 * c - x2 * s
        out[..., :, i + hd // 2:i + hd // 2 + 1] = x2 * c + x1 * s
    return out


def attn_ref(h, a, qk_gains=None):
    B, Tn, _ = h.shape
    hd = D // H
    q, k, v = (h @ W.weight.T for W in (a.q_proj, a.k_proj, a.v_proj))
    q, k, v = (t.view(B, Tn, H, hd).transpose(1, 2) for t in (q, k, v))
    if qk_gains is not None:   # HybridNorm-style per-head RMSNorm on q and k, before RoPE
        q, k = rms(q, qk_gains[0]), rms(k, qk_gains[1])
    pos = torch.arange(Tn)
    q, k = rope_ref(q, pos), rope_ref(k, pos)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    scores = scores.masked_fill(torch.ones(Tn, Tn).triu(1).bool(), float("-inf"))
    o = torch.softmax(scores, -1) @ v
    return o.transpose(1, 2).reshape(B, Tn, D) @ a.o_proj.weight.T


def ffn_ref(h, m):
    g = h @ m.gate_proj.weight.T
    return (g * torch.sigmoid(g) * (h @ m.up_proj.weight.T)) @ m.down_proj.weight.T


def block_ref(blk, l, scheme, x, y):
    """One layer straight from the equations (c_l = sqrt(2(l+1)), l 0-indexed)."""
    c = math.sqrt(2 * (l + 1))
    an, fn = blk.attn_norms, blk.ffn_norms
    A = lambda h: attn_ref(h, blk.attn, (blk.attn.q_norm.weight, blk.attn.k_norm.weight)
                           if scheme == "hybrid_pre" else None)
    Fn = lambda h: ffn_ref(h, blk.mlp)
    if scheme == "pre":
        x = x + A(rms(x, an["ln"].weight))
        return x + Fn(rms(x, fn["ln"].weight)), None
    if scheme == "post":
        x = rms(x + A(x), an["ln"].weight)
        return rms(x + Fn(x), fn["ln"].weight), None
    if scheme == "post_pre":
        for F_, n in ((A, an), (Fn, fn)):
            u = rms(x, n["post"].weight)
            z = rms(u + rms(y, n["pre"].weight), n["in"].weight)
            r = F_(z)
            x, y = u + r / c, y + r
        return x, y
    # hybrid_pre: attention h = x*c1 + LN_attn_y(y); x = x + att/c; y = y + att
    r = A(x * blk.c1 + rms(y, an["pre"].weight))
    x, y = x + r / c, y + r
    # FFN: x_n = LN_ff(x); ffn_in = LN_ff_in(x_n + LN_ff_y(y)); y = y + o; x = x_n + o/c
    xn = rms(x, fn["post"].weight)
    o = Fn(rms(xn + rms(y, fn["pre"].weight), fn["in"].weight))
    return xn + o / c, y + o


def model_ref(m, ids, scheme):
    E = m.model.embed_tokens.weight
    x = E[ids]
    y = x.clone() if scheme in ("post_pre", "hybrid_pre") else None
    for l, blk in enumerate(m.model.layers):
        x, y = block_ref(blk, l, scheme, x, y)
    mm = m.model
    if scheme == "pre":
        h = rms(x, mm.norm.weight)
    elif scheme == "post":
        h = x
    else:   # h = LN_final(LN_a(x) + LN_b(y))
        h = rms(rms(x, mm.norm_x.weight) + rms(y, mm.norm_y.weight), mm.norm.weight)
    return h @ E.T                                                     # tied head


@pytest.mark.parametrize("scheme", NORM_SCHEMES)
def test_block_matches_card_equations_float64(scheme):
    m = make(scheme)
    torch.manual_seed(1)
    x, y = torch.randn(2, T, D, dtype=torch.float64), torch.randn(2, T, D, dtype=torch.float64)
    if scheme in ("pre", "post"):
        y = None
    cos, sin = rope_cos_sin(torch.arange(T)[None], D // H, 10000.0, torch.float64)
    with torch.no_grad():
        for l, blk in enumerate(m.model.layers):
            got = blk(x, y, cos[:, None], sin[:, None], None)
            want = block_ref(blk, l, scheme, x, y)
            torch.testing.assert_close(got[0], want[0], rtol=0, atol=1e-10)
            if y is not None:
                torch.testing.assert_close(got[1], want[1], rtol=0, atol=1e-10)
                # x and y really differ after a block (two streams, not one)
                assert (got[0] - got[1]).abs().max() > 1e-3


@pytest.mark.parametrize("scheme", NORM_SCHEMES)
def test_model_matches_card_equations_float64(scheme):
    m = make(scheme)
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(m(ids).logits, model_ref(m, ids, scheme), rtol=0, atol=1e-10)


def test_hybrid_attn_norm_flag_uses_ln_on_x():
    m = make("hybrid_pre", hybrid_attn_norm=True)
    blk = m.model.layers[1]
    assert blk.c1 is None
    torch.manual_seed(3)
    x, y = torch.randn(2, T, D, dtype=torch.float64), torch.randn(2, T, D, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(T)[None], D // H, 10000.0, torch.float64)
    c = math.sqrt(2 * 2)
    an = blk.attn_norms
    r = attn_ref(rms(x, an["post"].weight) + rms(y, an["pre"].weight), blk.attn,
                 (blk.attn.q_norm.weight, blk.attn.k_norm.weight))
    with torch.no_grad():
        got = blk._sublayer("attn", lambda h: blk.attn(h, cos[:, None], sin[:, None], None), x, y)
    torch.testing.assert_close(got[0], x + r / c, rtol=0, atol=1e-10)
    torch.testing.assert_close(got[1], y + r, rtol=0, atol=1e-10)


def test_pre_scheme_equals_transformers_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    m = make("pre", dtype=torch.float32)
    lc = LlamaConfig(vocab_size=V, hidden_size=D, intermediate_size=FF, num_hidden_layers=L,
                     num_attention_heads=H, num_key_value_heads=H, rms_norm_eps=EPS,
                     max_position_embeddings=64, tie_word_embeddings=True, attention_bias=False,
                     mlp_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    ref = LlamaForCausalLM(lc).eval()
    sd = {}
    for k, v in m.state_dict().items():
        k = (k.replace(".attn.", ".self_attn.").replace(".attn_norms.ln.", ".input_layernorm.")
             .replace(".ffn_norms.ln.", ".post_attention_layernorm."))
        sd[k] = v
    missing, unexpected = ref.load_state_dict(sd, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    ids = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(4))
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, 6:] = 0                                                    # right padding
    with torch.no_grad():
        torch.testing.assert_close(m(ids).logits, ref(ids).logits, rtol=0, atol=1e-5)
        a, b = m(ids, attention_mask=mask).logits, ref(ids, attention_mask=mask).logits
        torch.testing.assert_close(a[mask.bool()], b[mask.bool()], rtol=0, atol=1e-5)
        # padding does not change the real positions' logits
        torch.testing.assert_close(a[1, :6], m(ids[1:2, :6]).logits[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("scheme", NORM_SCHEMES)
def test_param_count_closed_form(scheme):
    d, nl, dff, v, dh = 64, 6, 172, 35, 16
    c = SiameseNormConfig(vocab_size=v, hidden_size=d, intermediate_size=dff, num_hidden_layers=nl,
                          num_attention_heads=4, norm_scheme=scheme)
    n = sum(p.numel() for p in SiameseNormForCausalLM(c).parameters())
    core = v * d + nl * (4 * d * d + 3 * d * dff)                     # tied embedding + blocks
    pre = core + (2 * nl + 1) * d
    want = {"pre": pre,
            "post": core + 2 * nl * d,                                 # no final norm
            "post_pre": pre + (4 * nl + 2) * d,                        # claim C4
            "hybrid_pre": core + nl * (2 * d + 2 * dh + 3 * d) + 3 * d}[scheme]
    assert n == want
    if scheme == "post_pre":
        assert n - pre == 1664                                         # claim C4: 26 · 64


def test_labels_loss_is_hf_shifted():
    m = make("post_pre", dtype=torch.float32)
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(5))
    labels = ids.clone()
    labels[0, 3] = -100
    with torch.no_grad():
        out = m(ids, labels=labels)
        lp = torch.log_softmax(out.logits.double(), -1)
        terms = [-lp[b, t - 1, ids[b, t]] for b in range(2) for t in range(1, T) if labels[b, t] != -100]
    assert float(out.loss) == pytest.approx(float(sum(terms) / len(terms)), abs=1e-5)


def test_generate_is_greedy_argmax():
    m = make("hybrid_pre", dtype=torch.float32)
    m.generation_config.pad_token_id = 0
    ids = torch.randint(0, V, (1, 4), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        g = m.generate(ids, max_new_tokens=4, do_sample=False)
        hand = ids
        for _ in range(4):
            hand = torch.cat([hand, m(hand).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(g, hand)


@pytest.mark.parametrize("scheme", ["post_pre", "hybrid_pre"])
def test_save_load_and_lm_eval(tmp_path, scheme):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM

    from methods.core.models import save_model
    from methods.core.tokenizer import train_tokenizer

    tok = train_tokenizer(["0123456789+-=\n abc"], kind="char")
    torch.manual_seed(7)
    c = SiameseNormConfig(vocab_size=len(tok), hidden_size=D, intermediate_size=FF,
                          num_hidden_layers=L, num_attention_heads=H, max_position_embeddings=64,
                          norm_scheme=scheme, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    m = SiameseNormForCausalLM(c).eval()
    with torch.no_grad():   # gains and c1 away from their init, so a re-init on load would show
        for p in m.parameters():
            if p.ndim == 1:
                p.add_(0.3 * torch.randn_like(p))
    save_model(m, tok, tmp_path / "m")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "m").eval()
    assert type(loaded) is SiameseNormForCausalLM and loaded.config.norm_scheme == scheme
    ids = torch.tensor([tok("12+34=46\n")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(m(ids).logits, loaded(ids).logits)
    lm = HFLM(pretrained=str(tmp_path / "m"), device="cpu", batch_size=1)
    pairs = [("12+34=", "46"), ("7-2=", "5\n")]
    got = [ll for ll, _ in lm.loglikelihood(
        [Instance("loglikelihood", doc={}, arguments=p, idx=0) for p in pairs])]
    for (ctx, cont), ll in zip(pairs, got):
        ci, ai = tok(ctx)["input_ids"], tok(ctx + cont)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(m(torch.tensor([ai])).logits[0].double(), -1)
        hand = sum(float(lp[t - 1, ai[t]]) for t in range(len(ci), len(ai)))
        assert ll == pytest.approx(hand, abs=1e-4)


@pytest.mark.parametrize("scheme", NORM_SCHEMES)
def test_training_reduces_loss_on_repeated_batch(scheme, monkeypatch):
    from methods.core.train import TrainConfig, evaluate_loss, train

    monkeypatch.setenv("TQDM_DISABLE", "1")
    torch.manual_seed(8)
    m = SiameseNormForCausalLM(SiameseNormConfig(vocab_size=V, hidden_size=D, intermediate_size=FF,
                                                 num_hidden_layers=2, num_attention_heads=H,
                                                 norm_scheme=scheme))
    seq = torch.randint(0, V, (4, 17), generator=torch.Generator().manual_seed(9))
    batch = {"input_ids": seq[:, :-1], "labels": seq[:, 1:], "attention_mask": torch.ones(4, 16)}
    before = evaluate_loss(m, [batch])
    train(m, lambda step: batch, TrainConfig(steps=30, batch_size=4, lr=1e-2, warmup_steps=2))
    after = evaluate_loss(m, [batch])
    assert math.isfinite(after) and after < 0.8 * before, (before, after)
