"""FusionRoute's systems as an lm-eval model (paper scale): `FusionRouteLM`, registered as
`fusionroute`, decodes greedily with the same one-token step as the tiny evaluation
(`decode.make_step`: router + the expert its head picks, logits added; or one baseline system)
and the same batched loop (`fusion.greedy`), stopping at the model's eos ids or at the task's
`until` strings. Only `generate_until` tasks: every benchmark of fusionroute.hub.lm_eval_tasks
is one (gsm8k, minerva_math500, humaneval, mbpp, ifeval); a loglikelihood task is a one-line
error. The decoder recomputes the whole prefix at every token (no KV cache), as the tiny one.
"""
from __future__ import annotations

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from methods.core.results import InputError


@register_model("fusionroute")
class FusionRouteLM(LM):
    def __init__(self, step, tokenizer, stop_ids: list[int], batch_size: int = 8, name: str = "fusionroute",
                 max_gen_toks: int = 256, device=None):
        super().__init__()
        self.step, self.tok, self.stop_ids = step, tokenizer, list(stop_ids)
        self.batch_size, self.name, self.max_gen_toks, self._device = batch_size, name, max_gen_toks, device
        from methods.core.tokenizer import ensure_pad

        self.pad_id = ensure_pad(tokenizer)

    @property
    def tokenizer_name(self) -> str:
        return getattr(self.tok, "name_or_path", "fusionroute").replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self.tok.chat_template if chat_template else None

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt=True) -> str:
        return self.tok.apply_chat_template(chat_history, tokenize=False, add_generation_prompt=add_generation_prompt)

    def _encode(self, text: str) -> list[int]:
        # a chat-formatted context carries its own bos text; a plain one gets the tokenizer's specials
        bos = self.tok.bos_token
        return self.tok(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from .fusion import greedy

        out = [None] * len(requests)
        # requests with the same generation settings decode together
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            ctx, kw = r.args
            kw = dict(kw or {})
            if kw.get("do_sample"):
                raise InputError(f"{self.name}: task asks for sampling (do_sample); FusionRoute decodes greedily")
            until = kw.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            groups.setdefault((tuple(until), int(kw.get("max_gen_toks", self.max_gen_toks))), []).append(i)
        for (until, max_new), idx in groups.items():
            prompts = [self._encode(requests[i].args[0]) for i in idx]

            def stop_fn(toks, until=until):
                return bool(until) and any(u in self.tok.decode(toks, skip_special_tokens=True) for u in until)

            def step(ids, lens):
                if self._device is not None:
                    ids, lens = ids.to(self._device), lens.to(self._device)
                return self.step(ids, lens)

            gens = greedy(step, prompts, max_new, self.stop_ids, self.pad_id, self.batch_size, stop_fn=stop_fn)
            for i, g in zip(idx, gens):
                g = [t for t in g if t not in self.stop_ids]
                text = self.tok.decode(g, skip_special_tokens=True)
                for u in until:
                    text = text.split(u)[0]
                out[i] = text
        return out

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise InputError(f"{self.name}: loglikelihood tasks are not supported (FusionRoute is evaluated on "
                         "generate_until tasks)")

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise InputError(f"{self.name}: loglikelihood_rolling tasks are not supported (FusionRoute is evaluated "
                         "on generate_until tasks)")
