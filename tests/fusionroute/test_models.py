"""Batched greedy decoding of a real tiny Llama against transformers' generate, and measured
(not assumed) costs: analytic FLOPs/token = FlopCounterMode's count, wall time > 0."""
import pytest
import torch

from methods.core.models import ModelConfig, build_model
from methods.core.tokenizer import train_tokenizer
from methods.fusionroute import data as D
from methods.fusionroute.config import EvalConfig
from methods.fusionroute.decode import decode, make_step
from methods.fusionroute.evaluate import costs, merge
from methods.fusionroute.router import router_module


@pytest.fixture(scope="module")
def setup():
    tok = train_tokenizer([D.alphabet()], kind="char")
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=48)
    experts = [build_model(cfg, tok, seed=s).eval() for s in (0, 1, 2)]
    router = router_module(build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=48),
                                        tok, seed=3), 3).eval()
    return tok, experts, router


def test_batched_greedy_equals_hf_generate(setup):
    tok, experts, router = setup
    prompts = ["Q:1+2=", "Q:rev(abcde)=", "Q:close(([<="]
    outs = decode(make_step("expert", router, experts, expert=1), tok, prompts, 6, 2)
    for p, o in zip(prompts, outs):
        ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            g = experts[1].generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id,
                                    eos_token_id=tok.convert_tokens_to_ids(";"))
        assert o == tok.decode(g[0, ids.shape[1]:])


def test_fusionroute_step_equals_summed_logits(setup):
    tok, experts, router = setup
    ids = torch.tensor([tok("Q:rev(12+3)=", add_special_tokens=False)["input_ids"]])
    lens = torch.tensor([ids.shape[1]])
    with torch.no_grad():
        r, w = router(ids)
        E = torch.stack([e(input_ids=ids).logits[0, -1] for e in experts])
    i = int(w[0, -1].argmax())
    want = int((r[0, -1] + E[i]).argmax())
    assert int(make_step("fusionroute", router, experts)(ids, lens)[0]) == want
    assert int(make_step("expert_only", router, experts)(ids, lens)[0]) == int(E[i].argmax())


def test_merge_is_the_weight_average(setup):
    _, experts, _ = setup
    m = merge(experts)
    k = "model.layers.0.self_attn.q_proj.weight"
    want = sum(e.state_dict()[k] for e in experts) / 3
    assert torch.allclose(m.state_dict()[k], want, atol=1e-7)


def test_costs_are_measured(setup):
    _, experts, router = setup
    ev = EvalConfig(max_new_tokens=10, batch_size=512, cost_ctx_len=8, cost_batch=2, cost_repeats=2)
    c = costs({"expert": experts[0], "router": router.lm}, ev)
    for name in ("expert", "router"):
        assert c[name]["flops_rel_err"] < 1e-3
        assert c[name]["wall_s_per_token"] > 0
    assert c["router"]["flops_per_token_counted"] < c["expert"]["flops_per_token_counted"]
