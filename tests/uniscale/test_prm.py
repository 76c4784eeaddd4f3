"""The Skywork-o1 PRM reader (methods/uniscale/prm.py) against a reference computation: the
official PRM_MODEL forward (SkyworkAI/skywork-o1-prm-inference, model_utils/prm_model.py) is
sigmoid(v_head(hidden_states[-1])) of the causal LM, read at the "\\n" step tokens that
model_utils/io_utils.py `prepare_input` flags; here that is recomputed with transformers'
Qwen2ForCausalLM and the value-head tensors of the stand-in checkpoint."""
import shutil

import pytest

torch = pytest.importorskip("torch")

from methods.core.results import InputError  # noqa: E402
from methods.uniscale import prm  # noqa: E402
from tests.paper_path import standins  # noqa: E402

PROBLEMS = ["What is 3 plus 4?", "A farmer has 12 sheep and sells 5. How many are left?"]
RESPONSES = ["We add the numbers.\n3 + 4 = 7\nThe answer is 7.",
             "Start with 12.\nSubtract 5: 12 - 5 = 7.\nSo 7 sheep are left.\nThe answer is \\boxed{7}."]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("prm") / "qwen2_prm"
    rng = __import__("random").Random(0)
    standins.write_prm_model(d, [standins.corpus_text(rng, 8) for _ in range(60)] + PROBLEMS + RESPONSES)
    return d


def reference(d, problem, response):
    """Official forward: causal LM hidden_states[-1] → v_head → sigmoid at the flagged tokens."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(d))
    lm = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32).eval()
    st = load_file(str(d / "model.safetensors"))
    # official prepare_input, written out
    ids = tok.encode(tok.bos_token + problem + "\n")
    flags = [0] * len(ids)
    nl = tok.encode("\n")[-1]
    for s in response.split("\n"):
        s_ids = (tok.encode(s) if s else []) + [nl]
        ids += s_ids
        flags += [0] * (len(s_ids) - 1) + [1]
    with torch.no_grad():
        h = lm(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
    v = torch.sigmoid(h.float() @ st["v_head.summary.weight"].float().T + st["v_head.summary.bias"].float())[:, 0]
    return [float(v[k]) for k, f in enumerate(flags) if f], ids, flags


def test_step_rewards_match_reference(ckpt):
    model, tok = prm.load_prm(ckpt, dtype=torch.float32)
    got = prm.step_rewards(model, tok, PROBLEMS, RESPONSES, chunk=2)   # batched, right-padded
    for p, r, g in zip(PROBLEMS, RESPONSES, got):
        want, ids, flags = reference(ckpt, p, r)
        assert prm.prepare_input(tok, p, r) == (ids, flags)
        assert len(g) == r.count("\n") + 1
        assert g == pytest.approx(want, abs=1e-5)
    # scores: the last step's reward; a trailing newline ends the last step, it adds none
    s = prm.scores(model, tok, PROBLEMS, [r + "\n" for r in RESPONSES])
    assert s == pytest.approx([g[-1] for g in got], abs=1e-6)
    # the rewards are not constant (the head is read, not a bias)
    assert max(max(g) for g in got) - min(min(g) for g in got) > 1e-3


def test_pytorch_bin_checkpoint_reads_the_same(ckpt, tmp_path):
    from safetensors.torch import load_file

    d = tmp_path / "bin"
    shutil.copytree(ckpt, d)
    torch.save(load_file(str(d / "model.safetensors")), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    a, ta = prm.load_prm(ckpt, dtype=torch.float32)
    b, tb = prm.load_prm(d, dtype=torch.float32)
    assert prm.step_rewards(a, ta, PROBLEMS, RESPONSES) == prm.step_rewards(b, tb, PROBLEMS, RESPONSES)
    assert prm.has_value_head(d) and prm.has_value_head(ckpt)


def test_model_without_value_head_is_a_one_line_error(tmp_path):
    d = tmp_path / "plain"
    rng = __import__("random").Random(0)
    standins.write_model("qwen2", d, [standins.corpus_text(rng, 8) for _ in range(30)])
    assert not prm.has_value_head(d)
    with pytest.raises(InputError, match="no PRM value head") as e:
        prm.load_prm(d)
    assert str(d) in str(e.value) and "\n" not in str(e.value)
