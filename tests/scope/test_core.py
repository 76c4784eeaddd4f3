"""SCOPE's routing rule, retrieval, parser, reward, group advantages and SFT loss against hand
computations and reference libraries (scikit-learn, torch)."""
import math

import numpy as np
import pytest

from methods.scope import core


def _three_models():
    # models A, B, C: (norm_acc, norm_cost, pred_correct, norm_pred_cost)
    na = np.array([[1.0, 0.0, 0.5]])
    nc = np.array([[1.0, 0.0, 0.5]])
    pc = np.array([[1.0, 0.0, 1.0]])
    npc = np.array([[1.0, 0.0, 0.2]])
    return na, nc, pc, npc


def test_route_worked_example_scores_by_hand():
    na, nc, pc, npc = _three_models()
    # α = 0.5: γ' = 2(1 + 1) = 4, w' = 0.3 · 0.75 = 0.225
    # A: s1 = .5·1 + .5·0^4 = .5, s2 = .5 → .5;  B: s1 = s2 = .5·1 = .5 → .5
    # C: s1 = .25 + .5·.5^4 = .28125; s2 = .5 + .5·.8^4 = .7048 → .225·.28125 + .775·.7048 = .60950125
    s = core.route_scores(na, nc, pc, npc, 0.5)
    np.testing.assert_allclose(s[0], [0.5, 0.5, 0.60950125], atol=1e-12)
    # α = 0: γ' = 6, w' = .15: A 0, B 1, C = .15·.5^6 + .85·.8^6 = .22516615
    np.testing.assert_allclose(core.route_scores(na, nc, pc, npc, 0.0)[0], [0.0, 1.0, 0.00234375 + 0.2228224],
                               atol=1e-12)
    # α = 1: w' = .3: A 1, B 0, C = .3·.5 + .7·1 = .85
    np.testing.assert_allclose(core.route_scores(na, nc, pc, npc, 1.0)[0], [1.0, 0.0, 0.85], atol=1e-12)
    assert [int(core.route(na, nc, pc, npc, a)[0]) for a in (0.0, 0.5, 1.0)] == [1, 2, 0]


def test_route_flip_point_two_models():
    # A = (1,1,1,1), B = (0,0,0,0): final_A = α, final_B = 1 − α for any γ, w → flip at α = 0.5,
    # the tie goes to the first model (A)
    na = nc = pc = npc = np.array([[1.0, 0.0]])
    assert int(core.route(na, nc, pc, npc, 0.45)[0]) == 1
    assert int(core.route(na, nc, pc, npc, 0.5)[0]) == 0
    assert int(core.route(na, nc, pc, npc, 0.55)[0]) == 0
    np.testing.assert_allclose(core.route_scores(na, nc, pc, npc, 0.3)[0], [0.3, 0.7], atol=1e-12)
    # anchor-only (w' = 1) ignores the predictions
    assert int(core.route(np.array([[0.0, 1.0]]), np.array([[0.0, 0.0]]), pc, npc, 1.0, w=None)[0]) == 1


def test_anchor_stats_and_normalisation_by_hand():
    sims = np.array([[1.0, 0.5]])               # weights s² = [1, .25] → [.8, .2]
    corr = np.array([[[1.0], [0.0]]])
    cost = np.array([[[1.0], [3.0]]])
    acc, c = core.anchor_stats(sims, corr, cost)
    assert acc[0, 0] == pytest.approx(0.8) and c[0, 0] == pytest.approx(1.4)
    np.testing.assert_allclose(core.minmax_rows(np.array([[2.0, 4.0, 3.0], [1.0, 1.0, 1.0]])),
                               [[0, 1, 0.5], [0.5, 0.5, 0.5]])
    np.testing.assert_allclose(core.log_minmax_rows(np.array([[1.0, 10.0, 100.0]])), [[0, 0.5, 1]], atol=1e-9)


def test_topk_cosine_matches_sklearn_brute_force():
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(0)
    A, Q = rng.normal(size=(60, 12)), rng.normal(size=(15, 12))
    idx, sims = core.topk_cosine(Q, A, 10)
    nn = NearestNeighbors(n_neighbors=10, metric="cosine", algorithm="brute").fit(A)
    dist, ref = nn.kneighbors(Q)
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_allclose(sims, 1 - dist, atol=1e-12)


def test_embedding_retrieval_brute_force_numpy():
    anchors = ["Q:4+7*3=", "Q:12-5=", "R:abcdef=", "R:zyxw=", "Q:4+7*2=", "Q:9*9="]
    queries = ["Q:4+7*5=", "R:abcdeg="]
    A, Q = core.embed(anchors, queries)
    brute = np.array([[q @ a / (np.linalg.norm(q) * np.linalg.norm(a)) for a in A] for q in Q])
    idx, sims = core.topk_cosine(Q, A, 3)
    np.testing.assert_allclose(sims, -np.sort(-brute, axis=1)[:, :3], atol=1e-12)
    assert idx[0, 0] in (0, 4) and idx[1, 0] == 2        # nearest by shared char n-grams


def test_prompt_and_parser():
    p = core.build_prompt("L2", "Q:3+4=", [("Q:3+5=", 12, True), ("R:abc=", 8, False)])
    assert p == "Model: L2\nQ:3+5= {len: 12, correct: yes}\nR:abc= {len: 8, correct: no}\n> Q:3+4= "
    assert core.parse("**{len: 5, correct: no}**") == (5, False)
    assert core.parse("{len: 5, correct: maybe}") is None
    assert set(p) <= set(core.ALPHABET)


def test_reward_by_hand():
    assert core.reward("{len: 12, correct: yes}\n", 10, True)["total"] == pytest.approx(1 + 1 + 0.8)
    assert core.reward("{len: 25, correct: no}\n", 10, True)["total"] == pytest.approx(1 + 0 + 0)
    assert core.reward("{len: 9, correct: no}\n", 12, False)["total"] == pytest.approx(1 + 1 + 0.75)
    assert core.reward("{len: x", 10, True)["total"] == 0.0


def test_group_advantages_of_scope_rewards_use_the_sample_std():
    """The RL stage's advantages (methods.core.rl, float64 then float32) on SCOPE rewards: within
    each group of G = 4, (r − mean) / (sample std + 1e-4), std with divisor G − 1; the GRPO loss
    itself is checked by hand in tests/core/test_rl.py."""
    torch = pytest.importorskip("torch")
    from methods.core import rl

    texts = ["{len: 12, correct: yes}\n", "{len: 25, correct: no}\n", "{len: x", "{len: 10, correct: yes}\n"]
    r = [core.reward(t, 10, True)["total"] for t in texts] + [2.0] * 4
    assert r[:4] == pytest.approx([2.8, 1.0, 0.0, 3.0])
    adv = rl.group_advantages(torch.tensor(r, dtype=torch.float64), 4).float()
    g = np.array(r[:4])
    want = (g - g.mean()) / (g.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(adv[:4].numpy(), want, rtol=1e-6, atol=1e-6)
    assert adv[4:].tolist() == [0.0] * 4


def test_sft_loss_is_cross_entropy_of_the_target_only():
    torch = pytest.importorskip("torch")
    from methods.core.data import PromptAnswerBatches
    from methods.core.models import ModelConfig, build_model
    from methods.core.train import lm_loss
    from methods.scope.run import _tokenizer

    tok = _tokenizer()
    prompt, target = core.build_prompt("S", "Q:3+4=", [("Q:3+5=", 12, True)]), "{len: 9, correct: yes}\n"
    model = build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=128), tok, 0)
    batch = PromptAnswerBatches([(prompt, target)], tok).sequential_batches(1)[0]
    with torch.no_grad():
        got = float(lm_loss(model, batch))
        # the core SFT batches move the prompt's trailing space into the answer (lm-eval's split)
        p_ids = tok(prompt.rstrip(), add_special_tokens=False)["input_ids"]
        t_ids = tok(" " + target, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([p_ids + t_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        nll = [-float(logp[len(p_ids) - 1 + j, t]) for j, t in enumerate(t_ids)]
    assert len(t_ids) == len(target) + 1       # char tokenizer: one token per char
    assert got == pytest.approx(sum(nll) / len(nll), rel=1e-5)


def test_auc_dominance_pareto_area_by_hand():
    assert core.auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert math.isnan(core.auc([0.1, 0.2], [1, 1]))
    curve = [(0.5, 0.6), (1.0, 0.8)]
    assert core.dominated([(0.6, 0.6), (0.4, 0.5), (1.0, 0.81)], curve) == [True, False, False]
    assert core.pareto_auc(curve, 1.0) == pytest.approx(0.3)
