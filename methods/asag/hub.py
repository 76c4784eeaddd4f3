"""Paper-scale decoding of ASAG (arXiv 2606.15070) on hub reasoning models (DeepSeek-R1-Distill-Qwen,
Qwen3): the control loop of `decode.Decoder` (same signals and decision rule, `signals.py`) on
real chat templates and thinking delimiters, after DEER's HF implementation
(github.com/BugSmith/DEER, vanilla_deer.py) for the parts ASAG builds on:

- prompt: DEER's system prompt + the question through the model's chat template; the thought is
  opened with `<think>\\n` where the template does not open it (R1-Distill's newer templates do,
  Qwen3's lets the model write it; with greedy decoding both are the same trace).
- ATP: the model's greedy next token reads "Wait" or "Alternatively" (surrounding whitespace
  ignored); the thought closes at `</think>` or eos.
- probe: DEER's answer-inducing suffix "\\n**Final Answer**\\n\\nThe final answer is \\boxed{"
  (with the brace), ≤ probe_max greedy tokens up to a token that starts with "}"; C = mean
  probability of the answer tokens (DEER's avg policy without the brace and the closer); the
  probe branch is cropped from the KV cache afterwards.
- budget: `budget` generated tokens in all, of which int(think_ratio · budget) for the thought
  (DEER's think_ratio 0.9, max_len 16384); at an exit (DEER, ASAG, budget) "\\n</think>\\n\\n" is
  appended and the model writes its answer (≤ the rest of the budget); the answer is the last
  \\boxed{...} of the text after the thought.
- attention (ASAG, vanilla for the pre-study): the window's query rows (tokens since the previous
  ATP, ≤ window_cap) are recomputed over the cached prefix with eager attention on a copy of the
  cache (the real cache is untouched, so the trace is the one the SDPA/flash model decodes), and
  H and the trap test come from the last n_last_layers layers (`signals.attention_state`).
- jump: the ATP token is replaced by the jump prompt J (wording from the paper as summarised; NV).
- NoThinking (Ma et al. 2025, arXiv 2504.09858): the thought is prefilled as
  "Okay, I think I have finished thinking.\\n</think>\\n\\n" and the model answers.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from methods.core.answers import last_boxed
from methods.core.results import InputError

from .config import DecodeConfig, PaperConfig, Policy
from .grade import correct
from .signals import (
    EXIT,
    INJECT,
    JUMP,
    answer_confidence,
    attention_state,
    decide_at_atp,
    inject_probs,
)

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
ATP_WORDS = ("Wait", "Alternatively")
PROBE = "\n**Final Answer**\n\nThe final answer is \\boxed{"
OPEN_THINK, CLOSE_THINK = "<think>", "</think>"
EXIT_SUFFIX = "\n</think>\n\n"
JUMP_PROMPT = "Wait, my previous reasoning is not correct. I should adopt a more concise and different approach."
NOTHINK_PREFILL = "Okay, I think I have finished thinking.\n</think>\n\n"


def chat_prompt(tok, question: str, name: str) -> list[int]:
    """Token ids of the chat prompt, ending inside an opened thought."""
    if not getattr(tok, "chat_template", None):
        raise InputError(f"model {name}: its tokenizer has no chat template (ASAG decodes a chat reasoning model)")
    text = tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
                                   tokenize=False, add_generation_prompt=True)
    if not text.rstrip().endswith(OPEN_THINK):
        text += OPEN_THINK + "\n"
    return tok(text, add_special_tokens=False)["input_ids"]


class HubDecoder:
    def __init__(self, model, tok, cfg: DecodeConfig, think_ratio: float, atp_words=ATP_WORDS):
        self.model, self.tok, self.cfg = model, tok, cfg
        self.device = next(model.parameters()).device
        self.think_len = int(cfg.budget * think_ratio)
        self.answer_len = cfg.budget - self.think_len
        if self.think_len <= cfg.probe_max + 1 or self.answer_len < 1:
            raise InputError(f"decode.budget {cfg.budget} × paper.think_ratio {think_ratio} leaves no room for the "
                             f"thought ({self.think_len}) or the answer ({self.answer_len})")
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos = eos if isinstance(eos, list) else [eos]
        self.eos = {e for e in eos + [tok.eos_token_id] if e is not None}
        if not self.eos:
            raise InputError("the model names no eos token (generation_config / tokenizer)")
        self.enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]
        self.close = self.enc(CLOSE_THINK)
        self.atp_words = set(atp_words)
        self._text = lru_cache(maxsize=None)(lambda t: tok.decode([t]))

    def is_atp(self, t: int) -> bool:
        return self._text(t).strip() in self.atp_words

    def is_closer(self, t: int) -> bool:
        return self._text(t).lstrip().startswith("}")

    def _feed(self, ids, cache):
        import torch

        out = self.model(input_ids=torch.tensor([ids], device=self.device), past_key_values=cache, use_cache=True)
        return out.logits[0, -1].float(), out.past_key_values

    def probe(self, state, cache):
        """(answer tokens, answer text, C) at an ATP; the cache is cropped back afterwards."""
        import torch

        n = len(state)
        logits, cache = self._feed(self.enc(PROBE), cache)
        toks, probs = [], []
        for _ in range(self.cfg.probe_max):
            p = torch.softmax(logits, -1)
            t = int(p.argmax())
            if self.is_closer(t) or t in self.eos:
                break
            toks.append(t)
            probs.append(float(p[t]))
            logits, cache = self._feed([t], cache)
        cache.crop(n - cache.get_seq_length())
        return toks, self.tok.decode(toks).strip(), answer_confidence(probs)

    def attention(self, state, cache, rows, prev_span, cur_span):
        """H and the trap test of the window `rows` (absolute positions, the last rows of `state`):
        the rows are recomputed with eager attention over a copy of the cached prefix."""
        import torch
        from transformers import DynamicCache

        start = rows[0]
        tmp = DynamicCache()
        for i, layer in enumerate(cache.layers):
            tmp.update(layer.keys[:, :, :start], layer.values[:, :, :start], i)
        impl = self.model.config._attn_implementation
        self.model.set_attn_implementation("eager")
        try:
            out = self.model(input_ids=torch.tensor([state[start:]], device=self.device), past_key_values=tmp,
                             use_cache=True, output_attentions=True)
        finally:
            self.model.set_attn_implementation(impl)
        n_last = min(self.cfg.n_last_layers, len(out.attentions))
        return attention_state(out.attentions, rows, prev_span, cur_span, n_last, q_offset=start)

    def _answer(self, state, logits, cache):
        """Greedy answer after the thought, ≤ answer_len tokens or eos → generated ids."""
        gen = []
        for _ in range(self.answer_len):
            t = int(logits.argmax())
            gen.append(t)
            if t in self.eos:
                break
            logits, cache = self._feed([t], cache)
        return gen

    def _closes(self, state, t) -> bool:
        k = len(self.close)
        return (state[len(state) - k + 1:] + [t])[-k:] == self.close if k > 1 else t == self.close[0]

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
        if pol.kind == "nothink":
            ids = self.enc(NOTHINK_PREFILL)
            logits, cache = self._feed(ids, cache)
            state += ids
            return self._result(state, n0, n0 + len(ids), self._answer(state, logits, cache), "nothink", atps)
        while True:
            if len(state) - n0 >= self.think_len:
                reason = "budget"
                break
            p = torch.softmax(logits, -1)
            if target is not None:
                p = inject_probs(p, target, cfg.inject_weight)
            t = int(p.argmax())
            if t in self.eos:
                reason = "natural"
                break
            if self._closes(state, t):
                reason = "closed"
                break
            if self.is_atp(t):
                ans, text, conf = self.probe(state, cache)
                rec = {"pos": len(state) - n0, "C": conf, "A": text}
                st = None
                if pol.kind in ("asag", "vanilla"):
                    # the window (≥ the last token: an ATP right after the previous one or the prompt)
                    lo = max(cur_start, len(state) - cfg.window_cap)
                    rows = range(min(lo, len(state) - 1), len(state))
                    st = self.attention(state, cache, rows, prev_span, (cur_start, len(state)))
                action, H1, jumps = decide_at_atp(pol, conf, st, H1, jumps, rec)
                atps.append(rec)
                target = None
                if action == EXIT:
                    reason = "jump_limit" if jumps > pol.max_jumps else ("first_atp" if len(atps) == 1 else "confident")
                    break
                if action == INJECT:
                    target = sorted(set(ans))
                prev_span, cur_start = (cur_start, len(state)), len(state)
                if action == JUMP:
                    ids = self.enc(JUMP_PROMPT)
                    state += ids
                    logits, cache = self._feed(ids, cache)
                    continue
            state.append(t)
            logits, cache = self._feed([t], cache)
        if reason == "closed":       # the model closed its thought: it writes its answer itself
            state.append(t)
            logits, cache = self._feed([t], cache)
        else:                        # exit, budget or eos inside the thought: close it (DEER)
            ids = self.enc(EXIT_SUFFIX)
            state += ids
            logits, cache = self._feed(ids, cache)
        return self._result(state, n0, len(state), self._answer(state, logits, cache), reason, atps)

    def _result(self, state, n0, n_think, answer_ids, reason, atps):
        text = self.tok.decode(answer_ids, skip_special_tokens=True)
        return {"answer": last_boxed(text), "tokens": len(state) + len(answer_ids) - n0, "think_tokens": n_think - n0,
                "exit": reason, "n_atps": len(atps), "atps": atps,
                "text": self.tok.decode(state[n0:] + answer_ids, skip_special_tokens=False)}


def decode_hub(model_dir: str | Path, test_path: str | Path, cfg: DecodeConfig, paper: PaperConfig, name: str,
               out: str | Path) -> dict:
    """Decode every test problem with every model of `paper.models` under policy `name`; the rows
    carry the model, the benchmark and whether the answer is correct."""
    import torch

    from methods.core.models import load_model
    from methods.core.results import write_jsonl

    from .decode import take_per_benchmark

    pol = cfg.policy(name)
    hub = json.loads((Path(model_dir) / "hub.json").read_text())["hub_id"]
    if not paper.models:
        raise InputError("config key 'paper.models' is empty (the hub reasoning models to decode)")
    if hub not in paper.models:
        raise InputError(f"config key 'train.hub_id' {hub!r} is not one of 'paper.models' {paper.models}")
    if not Path(test_path).is_file():
        raise InputError(f"missing test file: {test_path}")
    rows = take_per_benchmark([json.loads(l) for l in Path(test_path).read_text().splitlines() if l.strip()],
                              cfg.n_problems)
    if not rows or "question" not in rows[0]:
        raise InputError(f"{test_path}: no benchmark problems (paper scale reads 'paper.benchmarks')")
    res, i = [], 0
    for mid in paper.models:
        model, tok = load_model(mid)
        prompts = [chat_prompt(tok, r["question"], mid) for r in rows]
        dec = HubDecoder(model, tok, cfg, paper.think_ratio)
        with torch.no_grad():
            for r, ids in zip(rows, prompts):
                o = dec.run(ids, pol)
                for a in o["atps"]:
                    a["A_hit"] = correct(a["A"], r["answer"], r["kind"])
                res.append({"i": i, "model": mid, "benchmark": r["benchmark"], "id": r["id"], "gold": r["answer"],
                            "correct": correct(o["answer"], r["answer"], r["kind"]), **o})
                i += 1
        del model, dec
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    write_jsonl(out, res)
    head = [r for r in res if r["model"] == hub]
    return {"policy": name, "models": len(paper.models), "n": len(res),
            "acc": sum(r["correct"] for r in head) / len(head), "tokens": sum(r["tokens"] for r in head) / len(head)}
