"""The pool's FLOPs/token are measured: the analytic count equals FlopCounterMode's; tasks are exact."""
import random

import pytest

from methods.core.model_pool import tasks


@pytest.mark.parametrize("n_kv,tie", [(None, True), (2, False)])
def test_analytic_flops_equal_flop_counter(n_kv, tie):
    from methods.core.model_pool.pool import analytic_forward_flops, arch, counted_forward_flops
    from methods.core.models import ModelConfig, build_model
    from methods.core.tokenizer import train_tokenizer

    tok = train_tokenizer([tasks.alphabet()], "char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv, d_ff=80,
                                    max_seq_len=64, tie_embeddings=tie), tok, 0)
    for n, batch in [(7, 1), (20, 3)]:
        counted = counted_forward_flops(model, n, batch)
        # tolerance: exact up to 0.1% (FlopCounterMode counts only matmuls, as the formula does)
        assert analytic_forward_flops(arch(model), n, batch) == pytest.approx(counted, rel=1e-3)


def test_arith_steps_rewrite_the_expression_left_to_right():
    import re

    rng = random.Random(0)
    for _ in range(200):
        it = tasks.arith_item(rng, 4, 2)
        toks = re.findall(r"[+\-*]|\d+", it["prompt"][2:-1])
        ops = list(zip(toks[1::2], map(int, toks[2::2])))
        v = int(toks[0])
        for k, (op, x) in enumerate(ops):
            v = v + x if op == "+" else v - x if op == "-" else v * x
            # step k = the running value, then the operations not yet done, verbatim
            assert it["steps"][k] == str(v) + "".join(toks[2 * k + 3:])
        assert len(it["steps"]) == len(ops) and it["answer"] == str(v) == it["steps"][-1]
        assert tasks.is_correct(it, tasks.target(it))
    assert all("*" not in tasks.arith_item(random.Random(i), 4, 1, ops="+-")["prompt"] for i in range(50))


def test_rev_and_verifier_labels_are_exact():
    rng = random.Random(1)
    it = tasks.rev_item(rng, 7, 7)
    assert tasks.target(it) == "".join(f"s:{s};" for s in it["steps"]) + f"A:{it['answer']}\n"
    assert "".join(it["steps"]) == it["prompt"][2:-1][::-1]
    train = [tasks.arith_item(rng, 3, 1) for _ in range(50)] + [tasks.rev_item(rng, 3, 9) for _ in range(50)]
    by_prompt = {t["prompt"]: t for t in train}
    exs = tasks.verifier_examples(train, 400, 0)
    n_bad = 0
    for text, marks, n_gold in exs:
        item = by_prompt[text.split("=", 1)[0] + "="]
        gold = item["prompt"] + tasks.target(item).replace("\n", "?")
        # marks sit on every `;` and on the final `?`
        assert [p for p, _ in marks] == [i for i, c in enumerate(text) if c in ";?"] and text.endswith("?")
        for pos, label in marks:
            # exact process label: Y iff the text up to this step equals the gold text up to it
            assert (label == "Y") == (text[:pos + 1] == gold[:pos + 1])
        # n_gold = length of the common prefix with the gold sequence (LM targets only there)
        assert text[:n_gold] == gold[:n_gold]
        assert n_gold == len(text) or n_gold == len(gold) or text[n_gold] != gold[n_gold]
        n_bad += text != gold
    # half the sequences are corrupted: 400 Bernoulli(0.5) draws, 4 sigma = 0.1
    assert abs(n_bad / len(exs) - 0.5) < 0.1
    assert tasks.verifier_text("Q:1+2=s:3;") == "Q:1+2=s:3;"
    assert tasks.verifier_text("Q:1+2=s:3;A:3\n") == "Q:1+2=s:3;A:3?"


def test_auroc_matches_pair_count():
    from methods.core.model_pool.pool import auroc

    rng = random.Random(3)
    s = [rng.choice([0.1, 0.2, 0.5, 0.7, 0.9]) for _ in range(60)]
    y = [rng.random() < 0.4 for _ in range(60)]
    pos = [a for a, b in zip(s, y) if b]
    neg = [a for a, b in zip(s, y) if not b]
    brute = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
    assert auroc(s, y) == pytest.approx(brute, abs=1e-12)
    assert auroc([0.1, 0.9], [False, True]) == 1.0 and auroc([0.5, 0.5], [False, True]) == 0.5


def test_mixture_shares():
    from methods.core.model_pool.pool import _mixture

    train = [tasks.arith_item(random.Random(i), 3, 1) for i in range(100)] + \
            [tasks.rev_item(random.Random(i), 3, 9) for i in range(100)]
    pairs = _mixture(train, 0.8, 0)
    n_arith = sum(p.startswith("Q:") for p, _ in pairs)
    assert n_arith == 100 and len(pairs) - n_arith == 25   # 100·0.2/0.8


def test_label_marks_of_sampled_completions():
    item = {"family": "arith", "prompt": "Q:4+7*3=", "steps": ["11*3", "33"], "answer": "33"}
    cases = {"s:11*3;s:33;A:33\n": "YYY", "s:11*3;s:34;A:34\n": "YNN", "s:11*3;s:3": "YN",
             "s:11*3;s:33;s:33;A:33\n": "YYNN", "s:12*3;s:36;A:36\n": "NNN", "s:11*3;s:33;": "YY",
             "s:11*3;s:33;A:333\n": "YYN", "s:11;s:33;A:33\n": "NNN"}
    for comp, want in cases.items():
        text, marks, n_gold = tasks.label_marks(item, item["prompt"] + comp)
        assert "".join(lab for _, lab in marks) == want, comp
        assert all(text[p] in ";?" for p, _ in marks) and marks[-1][0] == len(text) - 1
    # the common prefix with the gold `Q:4+7*3=s:11*3;s:33;A:33?`
    assert tasks.label_marks(item, "Q:4+7*3=s:11*3;s:34;A:34")[2] == len("Q:4+7*3=s:11*3;s:3")


def test_complete_batched_left_padded_equals_one_by_one_and_logits_equal_a_full_forward():
    import torch

    from methods.core.model_pool.pool import complete
    from methods.core.models import ModelConfig, build_model
    from methods.core.tokenizer import train_tokenizer

    tok = train_tokenizer([tasks.alphabet()], "char")
    model = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64), tok, 3).eval()
    prompts = ["Q:4+7=", "R:abcdefgh=", "Q:1-2+3-4="]          # different lengths: left padding matters
    batched, logits = complete(model, tok, prompts, 12, stops=(";",), return_logits=True)
    for p, ids, lg in zip(prompts, batched, logits):
        # one prompt alone, greedy by hand with full forwards (no cache, no padding)
        x = tok(p, add_special_tokens=False)["input_ids"]
        want, want_lg = [], []
        with torch.no_grad():
            for _ in range(12):
                out = model(input_ids=torch.tensor([x + want])).logits[0, -1].float()
                want_lg.append(out)
                want.append(int(out.argmax()))
                if want[-1] == tok.convert_tokens_to_ids(";"):
                    break
        assert ids == want
        # tolerance: float32 cached vs uncached attention, 1e-4 absolute
        assert torch.allclose(lg, torch.stack(want_lg), atol=1e-4)
