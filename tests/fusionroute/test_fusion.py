"""FusionRoute's decoding rule and losses against closed forms and hand computations."""
import math

import pytest
import torch
import torch.nn.functional as F

from methods.fusionroute import data as D
from methods.fusionroute.config import DataConfig
from methods.fusionroute.fusion import (
    dpo_loss,
    fuse,
    fused_seq_logp,
    greedy,
    informative,
    next_token,
    route_loss,
    sft_loss,
)

# vocabulary of the constructed case: 0 'a', 1 'b', 2 'c', 3 ';' (stop), 4 pad
A, B, C, STOP, PAD = range(5)


def _constructed_step(system):
    """Two frozen 'experts' whose top-1 is wrong at every step (gold completion: c ;), and a router
    whose complementary log-probs fix it; the routing head prefers expert 0."""
    def step(ids, lens):
        n = ids.shape[0]
        t = int(lens[0]) - 2                  # prompt length 2: t = index of the token being produced
        if t == 0:     # gold c: expert 0 has a > c (top-1 a), expert 1 has b > c; neither has c on top
            E = torch.tensor([[2.0, -1.0, 1.5, -3.0, -9.0], [-1.0, 2.0, 1.4, -3.0, -9.0]])
            r = torch.tensor([-2.0, -2.0, 1.0, -2.0, -9.0])
        else:          # gold ';': experts prefer to continue with a / b
            E = torch.tensor([[1.0, -2.0, -2.0, 0.5, -9.0], [-2.0, 1.0, -2.0, 0.6, -9.0]])
            r = torch.tensor([-1.0, -1.0, -1.0, 1.0, -9.0])
        w = torch.tensor([0.7, 0.3])
        return next_token(system, r.expand(n, -1), E.expand(n, -1, -1), w.expand(n, -1))
    return step


def test_expert_only_routing_fails_where_fusionroute_succeeds():
    prompts = [[A, B], [B, A]]
    gold = [C, STOP]
    fr = greedy(_constructed_step("fusionroute"), prompts, 4, STOP, PAD)
    eo = greedy(_constructed_step("expert_only"), prompts, 4, STOP, PAD)
    assert fr == [gold, gold]
    assert all(o[0] != C for o in eo)                  # expert-only routing starts with a wrong token
    # whichever expert a pure router picks, the first token is wrong: no expert has c on top
    for k in (0, 1):
        r = torch.zeros(1, 5)
        E = torch.tensor([[[2.0, -1.0, 1.5, -3.0, -9.0], [-1.0, 2.0, 1.4, -3.0, -9.0]]])
        assert int(next_token("expert", r, E, None, expert=k)) != C
    # and FusionRoute's token is the argmax of the summed raw logits (router + chosen expert)
    r0 = torch.tensor([-2.0, -2.0, 1.0, -2.0, -9.0])
    e0 = torch.tensor([2.0, -1.0, 1.5, -3.0, -9.0])
    assert int((r0 + e0).argmax()) == C


def test_logsoftmax_invariance_and_product_of_experts():
    g = torch.Generator().manual_seed(0)
    r = torch.randn(64, 50, generator=g) * 3
    E = torch.randn(64, 3, 50, generator=g) * 3
    ch = torch.randint(0, 3, (64,), generator=g)
    z = fuse(r, E, ch)
    e = E[torch.arange(64), ch]
    assert torch.equal(z.argmax(-1), (r + e).argmax(-1))
    diff = z - (r + e)                                     # a per-row constant
    assert torch.allclose(diff, diff[:, :1].expand_as(diff), atol=1e-5)
    # closed form: softmax of the fused scores = normalised product p_router · p_expert
    p = F.softmax(r, -1) * F.softmax(e, -1)
    assert torch.allclose(F.softmax(z, -1), p / p.sum(-1, keepdim=True), atol=1e-6)


def test_routing_loss_and_informative_mask_by_hand():
    # n=2 experts, B=1, T=3, V=3; labels: position 0 unlabelled, 1 → token 2, 2 → token 0
    El = torch.tensor([[[[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [1.0, 0.0, 0.0]]],
                       [[[0.0, 2.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]]])
    labels = torch.tensor([[-100, 2, 0]])
    mask = informative(El, labels)
    # top-1s: expert0 (2, 0, 0), expert1 (1, 2, 0): disagree at 0 (unlabelled) and 1; agree at 2
    assert mask.tolist() == [[False, True, False]]
    w = torch.tensor([[[0.0, 0.0], [1.0, -1.0], [0.5, 0.5]]], requires_grad=True)

    def lsm(x):
        m = max(x)
        return [v - m - math.log(sum(math.exp(u - m) for u in x)) for u in x for v in [u]]

    a = math.exp(1) / (math.exp(1) + math.exp(-1))
    p0 = math.exp(lsm([3.0, 0.0, 0.0])[2])
    p1 = math.exp(lsm([0.0, 0.0, 1.0])[2])
    want = -math.log(a * p0 + (1 - a) * p1)
    got = route_loss(w, El, labels, mask)
    assert got.item() == pytest.approx(want, rel=1e-6)
    got.backward()
    assert w.grad[0, 2].abs().sum() == 0 and w.grad[0, 0].abs().sum() == 0   # only informative positions
    # total SFT loss = LM cross-entropy of the router + λ · routing loss
    r = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 0.0]]])
    lm_want = -(lsm([0.0, 1.0, 2.0])[2] + lsm([2.0, 0.0, 0.0])[0]) / 2
    total, lm, rt = sft_loss(r, w.detach(), El, labels, lam=0.5)
    assert lm.item() == pytest.approx(lm_want, rel=1e-6)
    assert total.item() == pytest.approx(lm_want + 0.5 * want, rel=1e-6)
    # an empty informative set gives a zero routing loss
    assert route_loss(w, El, torch.tensor([[-100, -100, 0]]), informative(El, torch.tensor([[-100, -100, 0]]))).item() == 0.0


def test_cdpo_loss_by_hand():
    r = torch.tensor([[[1.0, 0.0], [0.0, 2.0]], [[0.0, 0.0], [1.0, 1.0]]])
    E = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]]])
    labels = torch.tensor([[-100, 1], [0, 1]])

    def fused_lp(rv, ev, y):          # log of the normalised product at one position
        num = [math.exp(a) * math.exp(b) for a, b in zip(rv, ev)]
        return math.log(num[y] / sum(num))

    want = [fused_lp([0.0, 2.0], [1.0, 0.0], 1),
            fused_lp([0.0, 0.0], [2.0, 0.0], 0) + fused_lp([1.0, 1.0], [0.0, 0.0], 1)]
    got = fused_seq_logp(r, E, labels)
    assert got.tolist() == pytest.approx(want, rel=1e-6)
    pw, pl, rw, rl = torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -1.0]), torch.tensor([-1.5, -2.0]), torch.tensor([-2.0, -1.5])
    beta = 0.1
    want = -sum(math.log(1 / (1 + math.exp(-beta * ((a - c) - (b - d))))) for a, b, c, d in zip(pw, pl, rw, rl)) / 2
    assert dpo_loss(pw, pl, rw, rl, beta).item() == pytest.approx(want, rel=1e-6)


def test_data_answers_are_correct():
    import random
    cfg = DataConfig(n_train=50, n_test=10, add_digits=2, rev_min=3, rev_max=6, brk_min=3, brk_max=6,
                     home_frac=0.9, seed=0)
    rng = random.Random(1)
    for _ in range(200):
        t = D.item(rng, "comp", cfg)
        a, b = map(int, t["prompt"][6:-2].split("+"))
        assert t["answer"] == str(a + b)[::-1] + ";"
        t = D.item(rng, "brk", cfg)
        s = t["prompt"][8:-1] + t["answer"][:-2]
        while any(p in s for p in ("()", "[]", "{}", "<>")):
            for p in ("()", "[]", "{}", "<>"):
                s = s.replace(p, "")
        assert s == ""
    train, test = D.generate(cfg)
    assert not {t["prompt"] for t in train} & {t["prompt"] for t in test}
    assert D.corrupt(random.Random(0), "85;") != "85;"
