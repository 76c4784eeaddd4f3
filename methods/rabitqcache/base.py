"""The tiny retrieval model (RaBitQCache study, tiny scale): a Llama with 2 heads × head_dim 64
trained with the shared trainer on the passkey texts, loss on the answer digits only (a
retrieval signal; the filler is unpredictable noise). At paper scale `hub_id` names the real
model and this step copies it into a local model directory instead of training."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from methods.core.models import build_model, hub_or_trained_base
from methods.core.results import InputError, dumps as strict_dumps, read_jsonl
from methods.core.train import evaluate_loss, train

from .config import BaseConfig


class AnswerBatches:
    """Training records as token ids; labels on the `n_digits` tokens after every "?" (the
    answers), -100 elsewhere. Texts have equal length, so batches need no padding."""

    def __init__(self, records: list[dict], tokenizer, n_digits: int, full_lm: bool = False):
        import torch

        ids = [tokenizer(r["text"], add_special_tokens=False)["input_ids"] for r in records]
        if len({len(i) for i in ids}) != 1:
            raise InputError("training texts must all have the same number of tokens")
        self.ids = torch.tensor(ids, dtype=torch.long)
        q = tokenizer.convert_tokens_to_ids("?")
        self.labels = torch.full_like(self.ids, -100)
        rows, cols = (self.ids == q).nonzero(as_tuple=True)
        for r, c in zip(rows.tolist(), cols.tolist()):
            # position t predicts token t+1: answer tokens c+1..c+n are targets of c..c+n-1
            self.labels[r, c:c + n_digits] = self.ids[r, c + 1:c + 1 + n_digits]
        if full_lm:
            self.train_labels = torch.cat([self.ids[:, 1:], torch.full_like(self.ids[:, :1], -100)], 1)
        else:
            self.train_labels = self.labels

    def batch(self, step: int, batch_size: int, seed: int) -> dict:
        import torch

        from methods.core.data import _step_generator

        rows = torch.randint(0, len(self.ids), (batch_size,), generator=_step_generator(seed, step))
        return {"input_ids": self.ids[rows], "labels": self.train_labels[rows]}

    def sequential(self, batch_size: int, n: int) -> list[dict]:
        n = min(n, len(self.ids))
        return [{"input_ids": self.ids[i:i + batch_size], "labels": self.labels[i:i + batch_size]}
                for i in range(0, n, batch_size)]


def train_base(cfg: BaseConfig, data_dir: str | Path, out_dir: str | Path) -> dict:
    """The DAG step: the hub model copied as is at paper scale, else the tiny base trained."""
    return hub_or_trained_base(cfg.hub_id, out_dir, lambda: _train(cfg, data_dir))


def _train(cfg: BaseConfig, data_dir: str | Path):
    from methods.core.tokenizer import load_tokenizer

    data_dir = Path(data_dir)
    tok = load_tokenizer(data_dir / "tokenizer")
    texts = read_jsonl(data_dir / "train.jsonl")
    if len(texts) <= cfg.val_texts:
        raise InputError(f"{len(texts)} training texts, need more than val_texts={cfg.val_texts}")
    train_set = AnswerBatches(texts[cfg.val_texts:], tok, cfg.n_digits, cfg.full_lm)
    if train_set.ids.shape[1] > cfg.model.max_seq_len:
        raise InputError(f"texts have {train_set.ids.shape[1]} tokens > model.max_seq_len {cfg.model.max_seq_len}")
    val = AnswerBatches(texts[:cfg.val_texts], tok, cfg.n_digits).sequential(cfg.train.batch_size, cfg.val_texts)
    model = build_model(cfg.model, tok, cfg.seed)
    tcfg = dataclasses.replace(cfg.train, seed=cfg.seed)
    rows = train(model, lambda s: train_set.batch(s, tcfg.batch_size, tcfg.seed), tcfg,
                 eval_fn=lambda: {"val_answer_loss": evaluate_loss(model, val)}, desc="rabitqcache base")
    summary = {"val_answer_loss": rows[-1]["val_answer_loss"],
               "n_params": sum(p.numel() for p in model.parameters()),
               "final_train_loss": next(r["loss"] for r in reversed(rows) if "loss" in r)}
    return model, tok, summary, {
        "train_log.json": strict_dumps({"rows": rows, "summary": summary}, indent=2, sort_keys=True) + "\n"}
