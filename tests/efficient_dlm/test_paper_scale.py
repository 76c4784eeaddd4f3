"""Efficient-DLM paper-scale path: the block masks reach a transformers model (Qwen3, the paper's
base family) through its own forward and give the logits of an explicit reference computation;
the KV-cached decoder on the HF path equals the Llama loop; the lm-eval model class's AR
likelihood equals the closed form and its ELBO layout equals the training layout; the corpus
data step streams a hub-layout dataset into shards and fails in one line on a broken one."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from methods.efficient_dlm.dlm import attention_mask, decode_dlm, forward, hf_forward

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=23, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    m = Qwen3ForCausalLM(cfg).eval()
    m.config._attn_implementation = "sdpa"
    return m


def reference(model, ids, pos, mask):
    """Qwen3 written out layer by layer (RMSNorm, q/k per-head RMSNorm, RoPE, GQA, softmax over the
    allowed keys with an explicit −inf fill, SwiGLU): the reference the masked HF forward must equal."""
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

    m, cfg = model.model, model.config
    N, Q = ids.shape
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    h = m.embed_tokens(ids)
    cos, sin = m.rotary_emb(h, pos)
    for layer in m.layers:
        a = layer.self_attn
        x = layer.input_layernorm(h)
        q = a.q_norm(a.q_proj(x).view(N, Q, nh, hd)).transpose(1, 2)
        k = a.k_norm(a.k_proj(x).view(N, Q, nkv, hd)).transpose(1, 2)
        v = a.v_proj(x).view(N, Q, nkv, hd).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~mask[None, None], float("-inf"))
        o = torch.softmax(s, -1) @ v
        h = h + a.o_proj(o.transpose(1, 2).reshape(N, Q, nh * hd))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return model.lm_head(m.norm(h))


@pytest.mark.parametrize("pattern", ["causal", "full", "blk_noisy", "blk_clean"])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_masked_hf_forward_equals_reference(qwen3, pattern, impl):
    L, B = 12, 4
    torch.manual_seed(1)
    x = torch.randint(0, 23, (2, L))
    pos = torch.arange(L).expand(2, L)
    if pattern == "blk_clean":
        x, pos = torch.cat([x, torch.randint(0, 23, (2, L))], 1), torch.cat([pos, pos], 1)
    mask = attention_mask(pattern, L, B)
    qwen3.config._attn_implementation = impl
    try:
        with torch.no_grad():
            out, kv = forward(qwen3, x, pos, mask)           # dispatches to hf_forward for Qwen3
            ref = reference(qwen3, x, pos, mask)
    finally:
        qwen3.config._attn_implementation = "sdpa"
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert len(kv) == 2 and kv[0][0].shape == (2, 2, x.shape[1], 8)
    if pattern == "causal":   # and the causal mask reproduces the unmasked HF forward
        torch.testing.assert_close(out, qwen3(input_ids=x).logits, atol=1e-5, rtol=1e-5)


def test_hf_forward_with_cache_equals_one_pass(qwen3):
    """The cache contract: k/v of a prefix passed back in give the logits of one joint forward."""
    torch.manual_seed(2)
    x = torch.randint(0, 23, (1, 10))
    pos = torch.arange(10)[None]
    full = attention_mask("blk_noisy", 10, 5)
    with torch.no_grad():
        one, _ = forward(qwen3, x, pos, full)
        _, kv = forward(qwen3, x[:, :5], pos[:, :5], full[:5, :5])
        two, _ = forward(qwen3, x[:, 5:], pos[:, 5:], full[5:], cache=kv)
    torch.testing.assert_close(two, one[:, 5:], atol=1e-5, rtol=1e-5)


def test_llama_hf_path_equals_the_tiny_loop():
    """The tiny Llama loop and the HF path are the same function of the mask (so paper-scale
    Qwen3 runs the tiny algorithm): logits and a whole cached decode agree."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=11, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     max_position_embeddings=64)).eval()
    m.config._attn_implementation = "sdpa"
    x = torch.randint(3, 11, (2, 8))
    pos = torch.arange(8).expand(2, 8)
    mask = attention_mask("blk_clean", 8, 4)
    with torch.no_grad():
        a, _ = forward(m, torch.cat([x, x], 1), torch.cat([pos, pos], 1), mask)
        b, _ = hf_forward(m, torch.cat([x, x], 1), torch.cat([pos, pos], 1), mask)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)

    class Wrapped(LlamaForCausalLM):     # another class: goes through hf_forward
        pass

    w = Wrapped(m.config).eval()
    w.load_state_dict(m.state_dict())
    kw = dict(block=4, threshold=0.5, max_new=8, mask_id=2, pad_id=0, stop_ids=[1])
    prompts = [[3, 4, 5], [6, 7, 8, 9, 10]]
    ga, na = decode_dlm(m, prompts, **kw)
    gb, nb = decode_dlm(w, prompts, **kw)
    assert torch.equal(ga, gb) and torch.equal(na, nb)


# ---------------------------------------------------------------- the lm-eval model class
class _Req:
    def __init__(self, *args):
        self.args = args


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    import random

    from tests.paper_path.standins import build_model, build_tokenizer, corpus_text

    rng = random.Random(0)
    tok = build_tokenizer("qwen", [corpus_text(rng, 8) for _ in range(100)], vocab_size=300)
    model = build_model("qwen3", tok)
    d = tmp_path_factory.mktemp("qwen3")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_ar_loglikelihood_is_the_causal_log_prob(qwen_dir):
    from methods.core.models import load_model
    from methods.efficient_dlm.lm import BlockDiffusionLM

    model, tok = load_model(qwen_dir)
    lm = BlockDiffusionLM(model=model, tokenizer=tok, mode="ar")
    ctx, cont = "The cat sat", " on the mat"
    (ll, _), = lm.loglikelihood([_Req(ctx, cont)])
    c = tok(ctx, add_special_tokens=False)["input_ids"]
    y = tok(ctx + cont, add_special_tokens=False)["input_ids"][len(c):]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([c + y])).logits[0].double(), -1)
    ref = sum(float(lp[len(c) - 1 + i, t]) for i, t in enumerate(y))
    assert abs(ll - ref) < 1e-4


def test_elbo_mask_is_the_training_layout_after_a_clean_context():
    """With a context of one whole block, the ELBO layout's continuation rows equal the training
    blk_clean mask of [x_t ; x_0] restricted to the blocks after the first."""
    from methods.efficient_dlm.lm import elbo_mask

    B, P, M = 4, 4, 8
    L = P + M
    train = attention_mask("blk_clean", L, B)
    ours = elbo_mask(P, M, B)
    rows = list(range(P, L))                                       # noisy continuation in the training layout
    cols = rows + [L + j for j in range(L)]                        # its noisy keys + all clean keys
    assert torch.equal(ours[:M], train[rows][:, cols])
    assert torch.equal(ours[M:, M:], train[L:, L:])


def test_dlm_loglikelihood_is_the_block_elbo(qwen_dir):
    """The estimate equals −mean over draws of Σ_masked CE/t computed here from the same draws,
    is deterministic, memoised, and ≤ 0."""
    from methods.core.models import load_model
    from methods.core.tokenizer import ensure_mask_token
    from methods.efficient_dlm.lm import BlockDiffusionLM

    model, tok = load_model(qwen_dir)
    ensure_mask_token(tok, model)
    lm = BlockDiffusionLM(model=model, tokenizer=tok, mode="dlm", block=4, mc_samples=64)
    r = _Req("The cat sat", " on the mat and the dog")
    (a, _), = lm.loglikelihood([r])
    lm2 = BlockDiffusionLM(model=model, tokenizer=tok, mode="dlm", block=4, mc_samples=64)
    (b, _), = lm2.loglikelihood([r])
    assert a == b and a < 0 and len(lm._ll) == 1
    # with every token masked (t = 1 for all draws) the bound is −Σ CE of the one-shot prediction
    lm.eps = 1.0
    lm._ll.clear()
    (c1, greedy), = lm.loglikelihood([r])
    from methods.efficient_dlm.lm import elbo_mask

    cids, y = lm._split(*r.args)
    P, M = len(cids), len(y)
    ids = torch.tensor([[lm.mask_id] * M + cids + y])
    pos = torch.cat([torch.arange(P, P + M), torch.arange(P + M)])[None]
    with torch.no_grad():
        lg, _ = forward(model, ids, pos, elbo_mask(P, M, 4))
    lg = lg[0, :M].float()
    lg[:, lm.mask_id] = float("-inf")
    ref = -float(F.cross_entropy(lg, torch.tensor(y), reduction="sum"))
    assert abs(c1 - ref) < 1e-4
    assert greedy == bool((lg.argmax(-1) == torch.tensor(y)).all())


# ---------------------------------------------------------------- the corpus data step
def _data(tmp_path, corpus, tokenizer, out):
    cfg = {"corpus": str(corpus), "n_train_docs": 1, "n_eval": 1, "tasks": ["add"], "mix": [1.0, 0.0],
           "max_digits": 2, "fixed_format": False, "rev_min": 1, "rev_max": 2, "rev_chars": "ab", "seed": 0}
    return subprocess.run([sys.executable, "-m", "methods.efficient_dlm", "data", "--config", json.dumps(cfg),
                           "--out", str(out), "--tokenizer", str(tokenizer), "--tokens", "300"],
                          cwd=ROOT, capture_output=True, text=True)


def test_corpus_shards_are_the_tokenized_documents(tmp_path, qwen_dir):
    from transformers import AutoTokenizer

    from methods.core.shards import ShardedTokenStream
    from tests.paper_path.standins import write_dataset

    write_dataset("text", tmp_path / "corpus")
    p = _data(tmp_path, tmp_path / "corpus", qwen_dir, tmp_path / "data")
    assert p.returncode == 0, p.stderr
    tok = AutoTokenizer.from_pretrained(str(qwen_dir))
    docs = [json.loads(x)["text"] for x in (tmp_path / "corpus" / "default" / "train.jsonl").read_text().splitlines()]
    ref = []
    for d in docs:
        ref += tok(d, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        if len(ref) >= 300:
            break
    s = ShardedTokenStream(tmp_path / "data" / "shards", 8)
    assert s.read(0, len(s)).tolist() == ref[:300]


def test_broken_corpus_is_one_line_and_leaves_no_output(tmp_path, qwen_dir):
    """A corpus whose documents have no `text` field (a wrong dataset) fails in one line naming
    the field, and leaves no data directory."""
    d = tmp_path / "corpus"
    (d / "default").mkdir(parents=True)
    (d / "default" / "train.jsonl").write_text("".join(json.dumps({"content": f"doc {i}"}) + "\n" for i in range(5)))
    (d / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                 "    path: default/train.jsonl\n---\n")
    p = _data(tmp_path, d, qwen_dir, tmp_path / "data")
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert "no field 'text'" in last and "Traceback" not in p.stderr
    assert not (tmp_path / "data").exists()


def test_drift_reads_sharded_bf16_weights_and_keeps_the_numpy_numbers(tmp_path):
    """The float64 per-tensor reader gives exactly the numbers of the whole-file numpy formula the
    tiny scale was computed with, and reads a bf16 copy saved in shards (the hub base's layout)."""
    import numpy as np
    from safetensors.numpy import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from methods.efficient_dlm.run import drift

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=11, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    a, c = LlamaForCausalLM(cfg), LlamaForCausalLM(cfg)
    a.save_pretrained(tmp_path / "a")
    c.save_pretrained(tmp_path / "c")
    got = drift(str(tmp_path / "a"), str(tmp_path / "c"))
    A, C = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "c" / "model.safetensors"))
    names = [n for n in A if "q_proj" in n]
    ref = (sum(float(np.sum((C[n].astype(np.float64) - A[n]) ** 2)) for n in names)
           / sum(float(np.sum(A[n].astype(np.float64) ** 2)) for n in names)) ** 0.5
    assert got["q"] == ref
    a.to(torch.bfloat16).save_pretrained(tmp_path / "a16", max_shard_size="20KB")
    assert len(list((tmp_path / "a16").glob("*.safetensors"))) > 1
    got16 = drift(str(tmp_path / "a16"), str(tmp_path / "c"))
    assert abs(got16["mean"] - got["mean"]) < 1e-2 * got["mean"]


def test_registered_class_loads_a_converted_dir_from_model_args(qwen_dir, tmp_path):
    """lm-eval's registry builds the class from a model_args string, and a converted directory
    brings its variant (attention pattern, shift) and its mask token."""
    import shutil

    from lm_eval.api.registry import get_model

    import methods.efficient_dlm.lm as lm_mod
    from methods.core.models import load_model, save_model
    from methods.core.tokenizer import ensure_mask_token

    model, tok = load_model(qwen_dir)
    mid = ensure_mask_token(tok, model)
    save_model(model, tok, tmp_path / "conv", {"variant.json": json.dumps({"variant": "fullbidir", "pattern": "full",
                                                                           "shift": True})})
    cls = get_model("efficient_dlm")
    assert cls is lm_mod.BlockDiffusionLM
    lm = cls.create_from_arg_string(f"pretrained={tmp_path / 'conv'},threshold=0.5,block=4")
    assert (lm.threshold, lm.block, lm.mask_id, lm.spec["pattern"], lm.spec["shift"]) == (0.5, 4, mid, "full", True)
    out = lm.generate_until([_Req("The cat", {"until": ["\n"], "max_gen_toks": 6})])
    # a random model commits one position per forward at τ 0.5; one block of 4, or two cut to max_gen_toks 6
    assert isinstance(out[0], str) and lm.stats["nfe"] == {4: 4, 6: 8}.get(lm.stats["committed"])
    shutil.rmtree(tmp_path / "conv")


def test_ar_generation_equals_transformers_greedy(qwen_dir):
    """mode=ar: our KV-cached greedy decoder through the masked HF forward gives transformers'
    own greedy `generate`, cut at the `until` string; the counters count one token per forward."""
    from methods.core.models import load_model
    from methods.efficient_dlm.lm import BlockDiffusionLM

    model, tok = load_model(qwen_dir)
    lm = BlockDiffusionLM(model=model, tokenizer=tok, mode="ar", batch_size=2)
    prompts = ["The cat sat on", "A dog"]
    out = lm.generate_until([_Req(p, {"until": ["zzz"], "max_gen_toks": 10}) for p in prompts])
    for p, o in zip(prompts, out):
        ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            g = model.generate(ids, max_new_tokens=10, do_sample=False, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id)
        assert o == tok.decode(g[0, ids.shape[1]:], skip_special_tokens=True).split("zzz")[0]
    assert lm.stats["nfe"] == lm.stats["committed"] and lm.stats["rows"] == 2
