"""Greedy decoding with and without the ASAG controller (arXiv 2606.15070; decision rule as
summarised from the paper, NV).

One sequence at a time, KV cache; an action transition point (ATP) is the model choosing
`Wait`. At every ATP the DEER probe appends "</think> \\boxed{", greedily generates ≤ probe_max
tokens up to "}", and is then discarded (cache cropped back). ASAG also runs one eager forward
pass over the state (attention maps of the last min(4, L) layers) for H and the trap test.
Every policy records its ATPs (C, probed answer, H, ΔH, trap, action), so the vanilla run also
holds the pre-study's measurements (its probes never change its trace).
"""
from __future__ import annotations

import json
from pathlib import Path

from methods.core.results import InputError

from .config import DecodeConfig, Policy
from .data import Vocab
from .signals import (
    EXIT,
    INJECT,
    JUMP,
    answer_confidence,
    attention_state,
    decide_at_atp,
    inject_probs,
)


class Decoder:
    def __init__(self, model, vocab: Vocab, cfg: DecodeConfig):
        self.model, self.v, self.cfg = model, vocab, cfg
        self.WAIT, self.END, self.BOX, self.CLOSE = vocab["Wait"], vocab["</think>"], vocab["\\boxed{"], vocab["}"]
        self.JUMP, self.EOS = vocab["<jump>"], vocab.eos_token_id
        self.digits = {vocab[str(d)] for d in range(10)}

    def _feed(self, ids, cache):
        import torch

        out = self.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        return out.logits[0, -1].float(), out.past_key_values

    def _answer(self, state, logits, cache, max_new):
        """Greedy continuation after "... \\boxed{" up to "}" → (answer tokens, their probs, n generated)."""
        import torch

        toks, probs = [], []
        for _ in range(max_new):
            p = torch.softmax(logits, -1)
            t = int(p.argmax())
            if t in (self.CLOSE, self.EOS):
                return toks, probs, len(toks) + 1
            toks.append(t)
            probs.append(float(p[t]))
            logits, cache = self._feed([t], cache)
        return toks, probs, len(toks)

    def probe(self, state, cache):
        """Trial answer and confidence at an ATP; the cache is cropped back afterwards."""
        n = len(state)
        logits, cache = self._feed([self.END, self.BOX], cache)
        toks, probs, _ = self._answer(state, logits, cache, self.cfg.probe_max)
        cache.crop(n - cache.get_seq_length())   # transformers ≥ 5: a negative count removes tokens
        ans = [t for t in toks if t in self.digits]
        return ans, answer_confidence([p for t, p in zip(toks, probs) if t in self.digits])

    def attention(self, state, rows, prev_span, cur_span):
        import torch

        out = self.model(input_ids=torch.tensor([state]), output_attentions=True, use_cache=False)
        n_last = min(self.cfg.n_last_layers, len(out.attentions))
        return attention_state(out.attentions, rows, prev_span, cur_span, n_last)

    def to_int(self, toks) -> int | None:
        s = "".join(self.v.words[t] for t in toks if t in self.digits)
        return int(s) if s else None

    def run(self, prompt_ids: list[int], pol: Policy) -> dict:
        import torch
        from transformers import DynamicCache

        cfg = self.cfg
        state = list(prompt_ids)
        n0 = len(state)
        cache = DynamicCache()
        logits, cache = self._feed(state, cache)
        atps, H1, jumps, target, reason = [], None, 0, None, None
        cur_start, prev_span = n0, None
        final_toks = None
        if pol.kind == "nothink":
            logits, cache = self._feed([self.END, self.BOX], cache)
            state += [self.END, self.BOX]
            final_toks, _, n = self._answer(state, logits, cache, 8)
            return self._result(state + final_toks + [self.CLOSE], n0, final_toks, "nothink", atps)
        while True:
            if len(state) - n0 >= cfg.budget - cfg.probe_max - 3:
                reason = "budget"
                break
            p = torch.softmax(logits, -1)
            if target is not None:
                p = inject_probs(p, target, cfg.inject_weight)
            t = int(p.argmax())
            if t in (self.END, self.EOS):
                reason = "natural"
                break
            if t == self.WAIT:
                ans, conf = self.probe(state, cache)
                rec = {"pos": len(state) - n0, "C": conf, "A": self.to_int(ans)}
                st = None
                if pol.kind in ("asag", "vanilla"):
                    rows = range(max(cur_start, len(state) - cfg.window_cap), len(state))
                    st = self.attention(state, rows, prev_span, (cur_start, len(state)))
                action, H1, jumps = decide_at_atp(pol, conf, st, H1, jumps, rec)
                atps.append(rec)
                target = None
                if action == EXIT:
                    reason = "jump_limit" if jumps > pol.max_jumps else ("first_atp" if len(atps) == 1 else "confident")
                    final_toks = ans
                    state += [self.END, self.BOX]
                    break
                if action == INJECT:
                    target = sorted(set(ans))
                if action == JUMP:
                    t = self.JUMP
                prev_span, cur_start = (cur_start, len(state)), len(state)
            state.append(t)
            logits, cache = self._feed([t], cache)
        if final_toks is None:
            if reason == "budget" or t == self.EOS:
                state += [self.END, self.BOX]
                logits, cache = self._feed([self.END, self.BOX], cache)
            else:  # the model closed its thought: let it write "</think> \boxed{" itself
                state.append(t)
                logits, cache = self._feed([t], cache)
                for _ in range(2):
                    t = int(logits.argmax())
                    state.append(t)
                    logits, cache = self._feed([t], cache)
                    if t == self.BOX:
                        break
            final_toks, _, _ = self._answer(state, logits, cache, 8)
        return self._result(state + final_toks + [self.CLOSE], n0, final_toks, reason, atps)

    def _result(self, state, n0, final_toks, reason, atps):
        return {"answer": self.to_int(final_toks), "tokens": len(state) - n0, "exit": reason,
                "n_atps": len(atps), "atps": atps, "text": self.v.decode(state[n0:])}


def take_per_benchmark(rows: list[dict], n: int) -> list[dict]:
    """The first `n` rows of each benchmark (rows without one: the first `n`), in order; 0 = all."""
    if not n:
        return rows
    seen: dict = {}
    out = []
    for r in rows:
        k = r.get("benchmark")
        seen[k] = seen.get(k, 0) + 1
        if seen[k] <= n:
            out.append(r)
    return out


def decode_policy(model_dir: str | Path, test_path: str | Path, cfg: DecodeConfig, name: str,
                  out: str | Path, paper=None) -> dict:
    """Decode the test problems under policy `name`: the tiny model (a trained directory), or at
    paper scale (the model directory records a hub id) every model of `paper.models` (`hub.py`)."""
    import torch

    from methods.core.results import write_jsonl

    from .train import load_tiny

    pol = cfg.policy(name)
    if (Path(model_dir) / "hub.json").is_file():
        from .hub import decode_hub

        if paper is None:
            raise InputError(f"{model_dir} names a hub model: decoding it needs the 'paper' section (--paper)")
        return decode_hub(model_dir, test_path, cfg, paper, name, out)
    model, vocab = load_tiny(model_dir)
    rows = take_per_benchmark([json.loads(l) for l in Path(test_path).read_text().splitlines() if l.strip()],
                              cfg.n_problems)
    dec = Decoder(model, vocab, cfg)
    res = []
    with torch.no_grad():
        for i, r in enumerate(rows):
            o = dec.run(vocab.encode(r["prompt"]), pol)
            res.append({"i": i, "gold": r["answer"], "correct": o["answer"] == r["answer"], **o})
    write_jsonl(out, res)
    acc = sum(r["correct"] for r in res) / len(res)
    tok = sum(r["tokens"] for r in res) / len(res)
    return {"policy": name, "acc": acc, "tokens": tok, "n": len(res)}
