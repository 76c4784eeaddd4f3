"""A checkpoint resumes only the run that wrote it (methods/core/train.py): it carries the hash of
the TrainConfig, the model's parameter shapes and the caller's identity; a checkpoint of another
run is ignored with one line on stderr, and the run starts from step 0, bit for bit a fresh run."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from methods.core import train as T

from .test_train import Interrupt, tiny_setup

CFG_A = T.TrainConfig(steps=8, batch_size=4, lr=3e-2, warmup_steps=2, ckpt_every=3, eval_every=4,
                      log_every=2, weight_decay=0.1, seed=3)
CFG_B = replace(CFG_A, lr=3e-3)


def run(cfg, ckpt, *, die_at=None, seed=0, identity=None):
    """Train a fresh tiny Llama (init `seed`) under `cfg`; die before update `die_at` (the kill)."""
    model, _, stream = tiny_setup(seed=seed)
    evals = stream.sequential_batches(4, 1)

    def batches(s):
        if s == die_at:
            raise Interrupt("killed")
        return stream.batch(s, cfg.batch_size, cfg.seed)

    rows = T.train(model, batches, cfg, ckpt_path=ckpt, identity=identity,
                   eval_fn=lambda: {"val_loss": T.evaluate_loss(model, evals)})
    return rows, model


def same(m1, m2):
    return all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))


def test_checkpoint_of_another_lr_is_discarded(tmp_path, capfd):
    ck = tmp_path / "ckpt.pt"
    fresh_b, mb = run(CFG_B, tmp_path / "fresh_b.pt")
    fresh_a, ma = run(CFG_A, tmp_path / "fresh_a.pt")
    assert fresh_a != fresh_b                                   # the lr matters

    # killed at lr A after 6 updates: the checkpoint of step 6 stays behind
    with pytest.raises(Interrupt):
        run(CFG_A, ck, die_at=7)
    assert torch.load(ck, weights_only=True)["step"] == 6
    capfd.readouterr()

    # rerun at lr B: from step 0 (the model as given, not the checkpoint's), equal to a fresh B
    rows, m = run(CFG_B, ck)
    err = capfd.readouterr().err
    a, b = T.run_hash(CFG_A, m), T.run_hash(CFG_B, m)
    lines = [line for line in err.splitlines() if "was written by another config" in line]
    assert lines == [f"checkpoint {ck} was written by another config (hash {a}≠{b}): starting afresh"]
    assert "resumed" not in err
    assert rows == fresh_b and same(m, mb)                      # bitwise: rows and weights
    assert not ck.exists()

    # killed at lr A again, rerun at lr A: resumes at step 6 and ends as the uninterrupted run
    with pytest.raises(Interrupt):
        run(CFG_A, ck, die_at=7)
    capfd.readouterr()
    rows, m = run(CFG_A, ck, seed=99)
    err = capfd.readouterr().err
    assert f"resumed from {ck} at step 6" in err and "another config" not in err
    assert rows == fresh_a and same(m, ma)


def test_a_rerun_that_dies_before_its_first_checkpoint_leaves_the_old_one(tmp_path):
    """Discarding is not deleting: B killed before its first checkpoint leaves A's, which A resumes."""
    ck = tmp_path / "ckpt.pt"
    fresh_a, ma = run(CFG_A, tmp_path / "fresh_a.pt")
    with pytest.raises(Interrupt):
        run(CFG_A, ck, die_at=7)
    with pytest.raises(Interrupt):
        run(CFG_B, ck, die_at=2)
    rows, m = run(CFG_A, ck, seed=99)
    assert rows == fresh_a and same(m, ma)


def test_identity_and_model_shape_are_part_of_the_hash(tmp_path, capfd):
    ck = tmp_path / "ckpt.pt"
    fresh, mf = run(CFG_A, tmp_path / "fresh.pt", identity={"data": "v2"})
    with pytest.raises(Interrupt):
        run(CFG_A, ck, die_at=7, identity={"data": "v1"})
    capfd.readouterr()
    rows, m = run(CFG_A, ck, seed=0, identity={"data": "v2"})     # another data fingerprint
    assert "was written by another config" in capfd.readouterr().err
    assert rows == fresh and same(m, mf)

    model, _, _ = tiny_setup()
    wider, _, _ = tiny_setup(tie=False)                         # one more parameter tensor
    assert T.run_hash(CFG_A, model) == T.run_hash(CFG_A, tiny_setup(seed=5)[0])   # init is not identity
    assert T.run_hash(CFG_A, model) != T.run_hash(CFG_A, wider)
    assert T.run_hash(CFG_A, model, {"x": 1}) != T.run_hash(CFG_A, model, {"x": 2})


def test_checkpoint_without_a_hash_is_not_resumed(tmp_path, capfd):
    """A checkpoint written before checkpoints carried a hash (or by hand) is another run's."""
    ck = tmp_path / "ckpt.pt"
    model, _, _ = tiny_setup(seed=7)
    T._save_checkpoint(ck, model, T.make_optimizer(model, CFG_A), 6, [])
    fresh, mf = run(CFG_A, tmp_path / "fresh.pt")
    rows, m = run(CFG_A, ck)
    assert "(hash None≠" in capfd.readouterr().err
    assert rows == fresh and same(m, mf)
