"""Supervised steps: the warm start (AdamW SFT on addition) and the SFT
continuation contrast (multiplication). Loss on answer tokens only."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from methods.core.rl import logits_of

from . import task


def sft_batch(pairs, op):
    """(ids, targets) with targets −100 on prompt positions; all prompts have equal length,
    answers are EOS-padded (pads after the first EOS are ignored)."""
    prompts = [task.encode(task.prompt(a, b, op)) for a, b in pairs]
    answers = [task.encode(task.answer(a, b, op)) for a, b in pairs]
    L = max(map(len, answers))
    ids, tgt = [], []
    for p, a in zip(prompts, answers):
        full = p + a + [task.EOS_ID] * (L - len(a))
        ids.append(full[:-1])
        tgt.append([-100] * (len(p) - 1) + a + [-100] * (L - len(a)))
    return torch.tensor(ids), torch.tensor(tgt)


def train(model, opt, pairs, op, steps, batch_size, seed, log=None, log_every=50):
    rows = []
    for step in range(steps):
        g = torch.Generator().manual_seed(seed * 100003 + step)
        idx = torch.randint(len(pairs), (batch_size,), generator=g).tolist()
        ids, tgt = sft_batch([pairs[i] for i in idx], op)
        model.train()
        loss = F.cross_entropy(logits_of(model, ids).flatten(0, 1).float(), tgt.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            rows.append({"step": step, "loss": loss.item()})
            if log:
                log(rows[-1])
    return rows
