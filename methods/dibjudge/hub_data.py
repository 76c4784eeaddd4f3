"""Paper-scale data of the DIBJudge study (arXiv 2603.10351): the same files as the synthetic
generator (`synth_lang.build`) — train / id / bias / adv JSONL of preference pairs and meta.json
— built from the hub datasets with the hub judge LM.

- train: criteria-free rows of the preference collection (`orig_criteria` empty, as the official
  preprocessing, github.com/AzureStarz/DIBJudge `scripts/preprocess_data.py`), `train_pairs`
  of them sampled; pair = (`orig_instruction`, `orig_response_A`, `orig_response_B`), the better
  one from `orig_preference` (else the `[RESULT] A|B` verdict at the end of `output`). Proxy
  labels per response (official `proxy_tasks.py` / 4B config): length in judge tokens (quantile
  bins), mean token NLL of the response under the judge LM (fixed bins at 0, ln 10, ln 20,
  ln 40, ln 80, ln 160, ln 10^6), type-token ratio of its tokens (5 bins on [0, 1]).
- id: every pairwise benchmark in `eval_data` (rows with prompt / chosen / rejected; one subset
  per language, or one subset with a `language` column), the order of the two responses drawn
  at random; grouped EN / L1 / L2 (English / other / the `low_resource` ISO codes), at most
  `n_test` pairs per benchmark and group. MM-Eval's Language Resource rows (codes with a
  script suffix in a one-subset benchmark) are left out, as in the official evaluation;
  M-RewardBench's `translation` subset (translation pairs, not responses) too.
- bias (equal quality) and adv (better = human, worse = translationese with an error) on the
  non-English ID pairs, the paper's translationese contrast built as the official pipeline
  builds its translationese: a response translated into English and back into its language by
  the judge LM (greedy decoding; the official pipeline samples at T 0.9, top-p 0.95). Bias
  pair: the chosen response vs its round trip (label = the MT one); adversarial pair: the
  chosen response vs the round trip of the rejected one (label = the human one). Pairs whose
  round trip comes back empty are dropped (counted in meta.json).
"""
from __future__ import annotations

import math
import random
import re
import sys
from pathlib import Path

from methods.core.results import InputError, atomic_path, write_json, write_jsonl

from .config import DataConfig, Hub
from .synth_lang import quantile_edges, to_bin

# official 4B config: proxy_nll_bins (ln 10 ... ln 160, closed by 0 and ln 10^6), max_response_len, max_lm_len
NLL_EDGES = (0.0, math.log(10), math.log(20), math.log(40), math.log(80), math.log(160), math.log(1e6))
MAX_RESPONSE_TOKENS = 8192
MAX_LM_TOKENS = 12000
GEN_BATCH = 8                 # sequences per generate / NLL call
# M-RewardBench subset names are ISO 639-3 + script; the languages its 23 subsets cover
ISO3 = {"arb": "ar", "ces": "cs", "deu": "de", "ell": "el", "eng": "en", "fra": "fr", "heb": "he",
        "hin": "hi", "ind": "id", "ita": "it", "jpn": "ja", "kor": "ko", "nld": "nl", "pes": "fa",
        "pol": "pl", "por": "pt", "ron": "ro", "rus": "ru", "spa": "es", "tur": "tr", "ukr": "uk",
        "vie": "vi", "zho": "zh"}
TRAIN_FIELDS = ("orig_instruction", "orig_response_A", "orig_response_B", "orig_criteria")
EVAL_FIELDS = ("prompt", "chosen", "rejected")
SKIP_SUBSETS = {"translation"}
TO_EN = ("Translate the text below into English. Leave code, formulas, numbers and tables as they are. "
         "Reply with the translation only.\n\n{text}")
FROM_EN = ("Translate the text below into the language with ISO 639-1 code '{lang}'. Leave code, formulas, "
           "numbers and tables as they are. Reply with the translation only.\n\n{text}")


def _empty(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or \
        (isinstance(v, str) and v.strip().lower() in ("", "none", "null"))


def group_of(iso: str, low: set[str]) -> str:
    return "EN" if iso == "en" else "L2" if iso in low else "L1"


def judge_prefix(tok, prompt: str) -> list[int]:
    """Token ids of the judge's chat turn for `prompt`, up to the start of the assistant reply
    (Qwen3: thinking off); the response tokens follow."""
    if not getattr(tok, "chat_template", None):
        raise InputError("the judge tokenizer has no chat template (needs a chat judge LM)")
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                   add_generation_prompt=True, enable_thinking=False)
    return tok(text, add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------------------ readers ----
def train_pairs(hub: Hub, seed: int) -> list[dict]:
    from methods.core.data import load_records

    rows = load_records(hub.train_data, "train")
    if rows:
        missing = [f for f in TRAIN_FIELDS if f not in rows[0]]
        if missing:
            raise InputError(f"train_data {hub.train_data} has no field {missing[0]!r} (has {sorted(rows[0])})")
    out = []
    for r in rows:
        if not _empty(r.get("orig_criteria")):
            continue
        a, b = str(r["orig_response_A"] or "").strip(), str(r["orig_response_B"] or "").strip()
        pref = str(r.get("orig_preference") or "").strip()
        if pref not in ("A", "B"):
            m = re.search(r"\[RESULT\]\s*([AB])\b", str(r.get("output") or ""))
            pref = m.group(1) if m else ""
        if not a or not b or pref not in ("A", "B"):
            continue
        out.append({"prompt": str(r["orig_instruction"] or "").strip(), "a": {"text": a, "style": "human"},
                    "b": {"text": b, "style": "human"}, "label": int(pref == "B"), "lang": "any"})
    if not out:
        raise InputError(f"train_data {hub.train_data}: no criteria-free row with two responses and a verdict")
    random.Random(seed).shuffle(out)
    return out[:hub.train_pairs] if hub.train_pairs else out


def eval_pairs(hub: Hub, n_test: int, seed: int) -> list[dict]:
    import datasets

    from methods.core.data import dataset_splits

    low = set(hub.low_resource)
    out = []
    for ds in hub.eval_data:
        name = Path(ds).name if Path(ds).exists() else ds.split("/")[-1]
        try:
            subsets = datasets.get_dataset_config_names(ds)
        except Exception as e:  # the hub client raises many types
            raise InputError(f"cannot list the subsets of eval dataset {ds!r}: {str(e).splitlines()[0]}") from None
        per_lang = len(subsets) > 1
        groups: dict[str, list[dict]] = {}
        for sub in subsets:
            if sub in SKIP_SUBSETS:
                continue
            splits = dataset_splits(ds, sub)
            if "test" not in splits:
                raise InputError(f"eval dataset {ds} subset {sub!r} has no 'test' split (has {splits})")
            try:
                rows = datasets.load_dataset(ds, sub, split="test").to_list()
            except Exception as e:  # the hub client raises many types
                raise InputError(f"cannot load eval dataset {ds!r} subset {sub!r}: {str(e).splitlines()[0]}") from None
            if rows:
                missing = [f for f in EVAL_FIELDS + (() if per_lang else ("language",)) if f not in rows[0]]
                if missing:
                    raise InputError(f"eval dataset {ds} subset {sub!r} has no field {missing[0]!r} (has {sorted(rows[0])})")
            rng = random.Random(f"{seed}-{name}-{sub}")
            for r in rows:
                code = sub if per_lang else str(r["language"])
                if "_" in code:
                    if not per_lang:
                        continue   # MM-Eval's Language Resource subset (official evaluation: core languages only)
                    code = ISO3.get(code.split("_")[0], code)
                c, j = str(r["chosen"] or "").strip(), str(r["rejected"] or "").strip()
                if not c or not j:
                    continue
                flip = rng.random() < 0.5   # the chosen response is B
                a, b = (j, c) if flip else (c, j)
                g = group_of(code, low)
                groups.setdefault(g, []).append(
                    {"prompt": str(r["prompt"]), "a": {"text": a, "style": "human"}, "b": {"text": b, "style": "human"},
                     "label": int(flip), "lang": g, "language": code, "source": name})
        for g, rows in sorted(groups.items()):
            random.Random(f"{seed}-{name}-{g}").shuffle(rows)
            out.extend(rows[:n_test])
    if not out:
        raise InputError(f"eval_data {hub.eval_data}: no test pair with prompt, chosen and rejected")
    return out


# -------------------------------------------------------------------------- the judge LM ----
class JudgeLM:
    """The hub judge LM, frozen (no LoRA): translator of the Bias Suite and the NLL proxy's LM."""

    def __init__(self, path: str):
        import torch

        from methods.core.models import load_model
        from methods.core.runtime import current

        self.torch, self.rt = torch, current()
        self.model, self.tok = load_model(path)
        if self.tok.pad_token_id is None:
            raise InputError(f"the judge tokenizer of {path} has no pad token")

    def _ids(self, text: str, cap: int) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"][:cap]

    def generate(self, prompts: list[str], sources: list[str]) -> list[str]:
        """Greedy replies to user turns `prompts`, at most 2 × (tokens of `sources`) + 16 new tokens each."""
        torch = self.torch
        outs = [""] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        pad = self.tok.pad_token_id
        for k in range(0, len(order), GEN_BATCH):
            idx = order[k:k + GEN_BATCH]
            seqs = [judge_prefix(self.tok, prompts[i])[-MAX_LM_TOKENS:] for i in idx]
            n = max(map(len, seqs))
            ids = torch.tensor([[pad] * (n - len(s)) + s for s in seqs], device=self.rt.device)
            mask = torch.tensor([[0] * (n - len(s)) + [1] * len(s) for s in seqs], device=self.rt.device)
            new = min(MAX_RESPONSE_TOKENS, max(2 * len(self._ids(sources[i], MAX_RESPONSE_TOKENS)) + 16 for i in idx))
            with torch.no_grad():
                gen = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                                          pad_token_id=pad)
            for i, row in zip(idx, gen[:, n:].tolist()):
                outs[i] = self.tok.decode(row, skip_special_tokens=True).strip()
        return outs

    def round_trip(self, texts: list[str], isos: list[str]) -> list[str]:
        en = self.generate([TO_EN.format(text=t) for t in texts], texts)
        return self.generate([FROM_EN.format(lang=l, text=e) for e, l in zip(en, isos)], texts)

    def nll(self, prompts: list[str], responses: list[str]) -> list[float]:
        """Mean token NLL of each response after its prompt's chat turn."""
        torch = self.torch
        out = []
        pad = self.tok.pad_token_id
        for k in range(0, len(prompts), GEN_BATCH):
            seqs, starts = [], []
            for p, r in zip(prompts[k:k + GEN_BATCH], responses[k:k + GEN_BATCH]):
                resp = self._ids(r, MAX_RESPONSE_TOKENS)
                pre = judge_prefix(self.tok, p)[-(MAX_LM_TOKENS - len(resp)):]
                seqs.append(pre + resp)
                starts.append(len(pre))
            n = max(map(len, seqs))
            ids = torch.tensor([s + [pad] * (n - len(s)) for s in seqs], device=self.rt.device)
            mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in seqs], device=self.rt.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
            lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
            for j, (s, st) in enumerate(zip(seqs, starts)):
                out.append(float(-lp[j, st - 1:len(s) - 1].mean()))
        return out


# ---------------------------------------------------------------------------- the build ----
def proxy_labels(train: list[dict], lm: JudgeLM, cfg: DataConfig) -> dict:
    """Adds 'proxy': {len, nll, ttr} bin ids (and the raw NLL) to every train response."""
    if cfg.nll_bins != len(NLL_EDGES) - 1:
        raise InputError(f"config key 'data.nll_bins' is {cfg.nll_bins}; the paper-scale NLL proxy has "
                         f"{len(NLL_EDGES) - 1} bins (edges ln 10 ... ln 160)")
    resp = [(r["prompt"], r[k]["text"]) for r in train for k in ("a", "b")]
    toks = [lm._ids(t, MAX_RESPONSE_TOKENS) for _, t in resp]
    nll = lm.nll([p for p, _ in resp], [t for _, t in resp])
    edges = {"len": quantile_edges([len(t) for t in toks], cfg.len_bins), "nll": list(NLL_EDGES[1:-1]),
             "ttr": [i / cfg.ttr_bins for i in range(1, cfg.ttr_bins)]}
    it = iter(zip(toks, nll))
    for r in train:
        for k in ("a", "b"):
            t, v = next(it)
            vals = {"len": len(t), "nll": v, "ttr": len(set(t)) / max(1, len(t))}
            r[k]["proxy"] = {n: to_bin(vals[n], edges[n]) for n in edges}   # 0 .. len(edges)
            r[k]["nll"] = round(v, 4)
    return edges


def translationese_sets(ids: list[dict], lm: JudgeLM, n_test: int, seed: int) -> tuple[list, list, int]:
    """Bias Suite and adversarial pairs from the non-English ID pairs (at most n_test per group)."""
    by_group: dict[str, list[dict]] = {}
    for r in ids:
        if r["lang"] != "EN":
            by_group.setdefault(r["lang"], []).append(r)
    src = []
    for g, rows in sorted(by_group.items()):
        src.extend(rows[:n_test])
    better = [r["ab"[r["label"]]]["text"] for r in src]
    worse = [r["ab"[1 - r["label"]]]["text"] for r in src]
    isos = [r["language"] for r in src]
    mt = lm.round_trip(better + worse, isos + isos)
    mt_better, mt_worse = mt[:len(src)], mt[len(src):]
    rng = random.Random(f"{seed}-translationese")
    bias, adv, dropped = [], [], 0
    for r, hb, mb, mw in zip(src, better, mt_better, mt_worse):
        if not mb or not mw:
            dropped += 1
            continue
        keep = {k: r[k] for k in ("prompt", "lang", "language", "source")}
        human, mt_b = {"text": hb, "style": "human"}, {"text": mb, "style": "mt"}
        flip = rng.random() < 0.5
        bias.append({**keep, "a": mt_b if flip else human, "b": human if flip else mt_b, "label": int(not flip)})
        mt_w = {"text": mw, "style": "mt"}
        flip = rng.random() < 0.5
        adv.append({**keep, "a": mt_w if flip else human, "b": human if flip else mt_w, "label": int(flip)})
    if not bias:
        raise InputError("every round-trip translation came back empty: no Bias Suite")
    return bias, adv, dropped


def build(cfg: DataConfig, hub: Hub, out_dir: str | Path) -> dict:
    if not hub.train_data or not hub.eval_data:
        raise InputError("train.hub.judge is set but train.hub.train_data or train.hub.eval_data is empty")
    if not hub.low_resource:
        raise InputError("train.hub.low_resource is empty: no low-resource group L2 for the claims")
    train = train_pairs(hub, cfg.seed)
    ids = eval_pairs(hub, cfg.n_test, cfg.seed)
    if not any(r["lang"] == "L2" for r in ids):   # before any model work
        raise InputError("eval_data has no pair in a train.hub.low_resource language: no L2 group for the claims")
    lm = JudgeLM(hub.judge)
    edges = proxy_labels(train, lm, cfg)
    bias, adv, dropped = translationese_sets(ids, lm, cfg.n_test, cfg.seed)
    splits = {"train": train, "id": ids, "bias": bias, "adv": adv}
    with atomic_path(out_dir, is_dir=True) as tmp:
        for name, rows in splits.items():
            write_jsonl(tmp / f"{name}.jsonl", rows)
        write_json(tmp / "meta.json", {"hub": True, "judge": hub.judge, "edges": edges,
                                       "n_bins": {"len": cfg.len_bins, "nll": cfg.nll_bins, "ttr": cfg.ttr_bins},
                                       "sizes": {k: len(v) for k, v in splits.items()},
                                       "dropped_empty_round_trip": dropped})
    sizes = {k: len(v) for k, v in splits.items()}
    print(f"hub data: {sizes}, {dropped} pairs dropped (empty round trip)", file=sys.stderr)
    return sizes
