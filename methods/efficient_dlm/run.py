"""Efficient-DLM DAG steps: data, AR base, conversion per variant, evaluation, aggregation."""
from __future__ import annotations

import json
import random
import time
from pathlib import Path

from methods.core.results import InputError, dumps as strict_dumps, write_text

from .config import ArConfig, ConvertConfig, DataConfig, EvalConfig

LETTERS = "abcdefghijklmnopqrstuvwxyz"
# the four conversion variants (Table 1's patterns, our selection): pattern, token shift, masking β (None = ln10/B')
VARIANTS = {
    "fullbidir": {"pattern": "full", "shift": True, "posmask": False},
    "blk_noisy": {"pattern": "blk_noisy", "shift": False, "posmask": False},
    "blk_clean": {"pattern": "blk_clean", "shift": False, "posmask": False},
    "blk_clean_posmask": {"pattern": "blk_clean", "shift": False, "posmask": True},
}


def add_line(rng, max_digits, fixed=False):
    a, b = (rng.randrange(10 ** rng.randint(1, max_digits)) for _ in range(2))
    if fixed:
        return f"{a:0{max_digits}d}+{b:0{max_digits}d}=", f"{a + b:0{max_digits + 1}d}"
    return f"{a}+{b}=", f"{a + b}"


def rev_line(rng, lo, hi, chars=LETTERS, op="rev"):
    s = "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))
    return f"{op} {s} = ", (s[::-1] if op == "rev" else s)


def task_line(task, rng, cfg):
    if task == "add":
        return add_line(rng, cfg.max_digits, cfg.fixed_format)
    return rev_line(rng, cfg.rev_min, cfg.rev_max, cfg.rev_chars, task)


def build_data(cfg: DataConfig, out: str, tokenizer: str | None = None, tokens: int | None = None):
    from methods.core.data import pcfg_sentence
    from methods.core.tokenizer import save_tokenizer, train_tokenizer

    if cfg.corpus is not None:
        return build_corpus(cfg.corpus, out, tokenizer, tokens)
    # tasks, mix and the rev lengths are checked by DataConfig (methods/efficient_dlm/config.py)
    if any(c in "+= \n" for c in cfg.rev_chars):
        raise InputError(f"config key 'data.rev_chars': an alphabet without '+', '=', space or newline, "
                         f"got {cfg.rev_chars!r}")
    k = len(cfg.tasks)
    rng = random.Random(cfg.seed)
    docs = []
    for _ in range(cfg.n_train_docs):
        j = rng.choices(range(k + 1), weights=cfg.mix)[0]
        p, a = task_line(cfg.tasks[j], rng, cfg) if j < k else (pcfg_sentence(rng), "")
        docs.append(p + a)
    erng = random.Random(cfg.seed + 1)
    train_set = set(docs)
    evals = []
    for task in cfg.tasks:
        n, tries = 0, 0
        while n < cfg.n_eval:
            tries += 1
            if tries > 100 * cfg.n_eval:
                raise InputError(f"config key 'n_eval': cannot draw {cfg.n_eval} held-out {task} prompts "
                                 "(too few distinct problems; raise max_digits / rev_max)")
            p, a = task_line(task, erng, cfg)
            if p + a in train_set:        # held out: never a training document
                continue
            evals.append({"task": task, "prompt": p, "answer": a})
            n += 1
    text = "\n".join(docs) + "\n"
    tok = train_tokenizer([text, LETTERS + "0123456789+=. \n"], "char")
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    save_tokenizer(tok, o / "tokenizer")
    write_text(o / "train.txt", text)
    write_text(o / "eval.jsonl", "".join(strict_dumps(r) + "\n" for r in evals))
    return {"docs": len(docs), "eval": len(evals), "vocab": len(tok)}


def build_corpus(corpus: str, out: str, tokenizer: str | None, tokens: int | None) -> dict:
    """Paper scale: the pretraining corpus (a hub dataset's `text` field, streamed through
    `datasets`, never held whole) tokenized with the AR base's tokenizer into token shards
    (`out/shards`, methods.core.shards), its first `tokens` tokens (hub.train_tokens; None: all),
    one EOS after each document. Written atomically: a failure leaves no `out`."""
    from transformers import AutoTokenizer

    from methods.core.data import stream_texts
    from methods.core.results import atomic_path
    from methods.core.shards import write_shards

    if not tokenizer:
        raise InputError(f"config key 'data.corpus' ({corpus!r}) needs the AR base's tokenizer "
                         "(config key 'ar.hub_id')")
    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load tokenizer {tokenizer}: {str(e).splitlines()[0]}") from None
    with atomic_path(out, is_dir=True) as tmp:
        index = write_shards(stream_texts(corpus, "text", "train"), tok, Path(tmp) / "shards", max_tokens=tokens)
        if not index["total_tokens"]:
            raise InputError(f"corpus {corpus!r} has no text")
        write_text(Path(tmp) / "corpus.json", json.dumps({"corpus": corpus, "tokenizer": str(tokenizer),
                                                          "requested_tokens": tokens,
                                                          "tokens": index["total_tokens"]}))
    return {"corpus": corpus, "tokens": index["total_tokens"]}


def _stream(data, tok, seq_len):
    """The training tokens: paper scale the corpus shards (`build_corpus`), else the generated text."""
    from methods.core.data import TokenStream

    if (Path(data) / "shards").is_dir():
        from methods.core.shards import ShardedTokenStream

        stream = ShardedTokenStream(Path(data) / "shards", seq_len)
        if stream.index.get("vocab_size", 0) > len(tok):
            raise InputError(f"token shards {Path(data) / 'shards'} were written with a vocabulary of "
                             f"{stream.index['vocab_size']} ids, the model's tokenizer has {len(tok)}")
        return stream
    return TokenStream.from_text((Path(data) / "train.txt").read_text(), tok, seq_len)


def train_ar(cfg: ArConfig, data: str, out: str):
    """The DAG step: at paper scale the pretrained AR base saved as is, else the tiny AR trained."""
    from methods.core.models import hub_or_trained_base

    return hub_or_trained_base(cfg.hub_id, out, lambda: _train_ar(cfg, data))


def _train_ar(cfg: ArConfig, data: str):
    from methods.core.models import build_model
    from methods.core.tokenizer import load_tokenizer
    from methods.core.train import train

    tok = load_tokenizer(Path(data) / "tokenizer")
    stream = _stream(data, tok, cfg.seq_len)
    model = build_model(cfg.model, tok, cfg.seed)
    rows = train(model, lambda s: stream.batch(s, cfg.train.batch_size, cfg.seed), cfg.train, desc="ar")
    return model, tok, rows[-1], {"train_log.json": strict_dumps(rows)}


def diffusion_mask_id(tok, model=None) -> int:
    """The id the diffusion noise writes and the decoder fills in (a [MASK] token).
    A tokenizer's own mask token if it has one. Else its unk: our tiny char tokenizer has
    <unk> and no mask, and <unk> never occurs in its data (the vocabulary is the corpus
    alphabet), so it is a free id — the tiny-scale conversions were trained with it and keep
    their numbers. Else (Qwen: no unk, no mask) `convert` adds <|mask|> and grows the model's
    embeddings by one mean-initialised row; decoding a converted model finds it again in the
    tokenizer saved beside it."""
    from methods.core.tokenizer import ensure_mask_token, require_tokens

    if tok.mask_token_id is None and tok.unk_token_id is not None:
        return tok.unk_token_id
    if model is None:
        return require_tokens(tok, ["mask"], "efficient_dlm decoding of a converted model")["mask"]
    return ensure_mask_token(tok, model)


def variant_spec(name: str, cfg: ConvertConfig) -> dict:
    import math

    if name not in VARIANTS:
        raise InputError(f"unknown variant {name!r} (one of {sorted(VARIANTS)})")
    v = dict(VARIANTS[name])
    beta = cfg.beta if cfg.beta is not None else math.log(10) / cfg.block
    v["beta"] = beta if v.pop("posmask") else 0.0
    v["clean_intra"] = cfg.clean_intra
    return v


def convert(cfg: ConvertConfig, variant: str, ar: str, data: str, out: str):
    import torch

    from methods.core.models import load_model, save_model
    from methods.core.train import train

    from .dlm import diffusion_loss

    spec = variant_spec(variant, cfg)
    model, tok = load_model(ar, training=True)
    stream = _stream(data, tok, cfg.seq_len)
    mask_id = diffusion_mask_id(tok, model)     # may add <|mask|> (saved with the tokenizer below)

    def loss_fn(m, batch):
        g = torch.Generator().manual_seed(cfg.seed * 7919 + int(batch["step"]))
        return diffusion_loss(m, batch["input_ids"], spec, cfg.block, g, mask_id, cfg.eps)

    def batch_fn(s):
        b = stream.batch(s, cfg.train.batch_size, cfg.seed + 1)
        return {"input_ids": b["input_ids"], "labels": b["labels"], "step": s}

    rows = train(model, batch_fn, cfg.train, loss_fn=loss_fn, desc=f"convert {variant}")
    save_model(model, tok, out, {"variant.json": json.dumps({"variant": variant, "seed": cfg.seed, **spec}),
                                 "train_log.json": strict_dumps(rows)})
    return rows[-1]


def _load_eval(data, n):
    rows = [json.loads(x) for x in (Path(data) / "eval.jsonl").read_text().splitlines() if x]
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        out += [r for r in rows if r["task"] == task][:n]
    return out


def _score(tok, gen, rows, nfe, decoded):
    import numpy as np

    from methods.core.tokenizer import token_id

    nl = token_id(tok, "\n")
    correct, ntok = [], []
    for r, g in zip(rows, gen.tolist()):
        cut = g.index(nl) if nl in g else len(g)
        correct.append(tok.decode(g[:cut]) == r["answer"])
        ntok.append(min(len(g), cut + 1))
    correct = np.array(correct)
    res = {"acc": float(correct.mean()), "correct": [int(c) for c in correct],   # per prompt, for intervals
           "nfe": float(nfe.float().mean()),
           "tpf": float(decoded.sum() / max(1, int(nfe.sum()))),
           "useful_tpf": float(sum(ntok) / max(1, int(nfe.sum())))}
    for task in dict.fromkeys(r["task"] for r in rows):
        sel = np.array([r["task"] == task for r in rows])
        res[f"acc_{task}"] = float(correct[sel].mean())
    return res, sum(ntok)


def decode_all(model, tok, rows, how, cfg: EvalConfig, threshold=None, spec=None):
    """Decode every prompt in batches; returns (scores, wall seconds)."""
    import torch

    from methods.core.tokenizer import ensure_pad, token_id

    from .dlm import decode_ar, decode_dlm

    # the stand-alone "\n" token ("Ċ" in byte-level BPE, where convert_tokens_to_ids("\n") is
    # None); a "\n" merged into a bigger token does not stop the id-based decoders
    stop = [token_id(tok, "\n"), tok.eos_token_id]
    pad = ensure_pad(tok)
    mask_id = diffusion_mask_id(tok) if how != "ar" else None
    gens, nfes, decs, wall = [], [], [], 0.0
    for i in range(0, len(rows), cfg.batch_size):
        chunk = rows[i:i + cfg.batch_size]
        prompts = [tok(r["prompt"], add_special_tokens=False)["input_ids"] for r in chunk]
        t0 = time.perf_counter()
        if how == "ar":
            g, n = decode_ar(model, prompts, max_new=cfg.max_new, pad_id=pad, stop_ids=stop)
            d = n.clone()                                  # one token per forward
        else:
            g, n = decode_dlm(model, prompts, block=cfg.block, threshold=threshold, max_new=cfg.max_new,
                              mask_id=mask_id, pad_id=pad, stop_ids=stop,
                              mode="full" if spec["pattern"] == "full" else "cache", shift=spec["shift"])
            d = (g != mask_id).sum(1)                      # every position the decoder committed
        wall += time.perf_counter() - t0
        g = torch.nn.functional.pad(g, (0, cfg.max_new - g.shape[1]), value=pad)
        gens.append(g)
        nfes.append(n)
        decs.append(d)
    res, ntok = _score(tok, torch.cat(gens), rows, torch.cat(nfes), torch.cat(decs))
    res["tokens_per_s"] = ntok / wall
    res["wall_s"] = wall
    return res


def evaluate(cfg: EvalConfig, ar: str, convs: list[str], data: str):
    from methods.core.models import load_model

    rows = _load_eval(data, cfg.n_per_task)
    model, tok = load_model(ar)
    out = [{"model": "ar", "threshold": None, **decode_all(model, tok, rows, "ar", cfg)}]
    for c in convs:
        spec = json.loads((Path(c) / "variant.json").read_text())
        model, tok = load_model(c)
        seed = spec.get("seed", 0)
        for th in cfg.thresholds:
            r = decode_all(model, tok, rows, "dlm", cfg, th, spec)
            out.append({"model": spec["variant"], "seed": seed, "threshold": th, **r})
            print(f"eval {spec['variant']} seed {seed} τ={th}: acc {r['acc']:.3f} tpf {r['tpf']:.2f}", flush=True)
    return out


class _Weights:
    """The tensors of a model directory's safetensors files (one file, or the shards of a large
    model such as the saved hub base), read one at a time as float64 numpy arrays (bf16 too,
    which numpy cannot hold): a 4B model's two copies are never in memory at once."""

    def __init__(self, d: str):
        from methods.core.safeload import safetensors_keys

        files = sorted(Path(d).glob("*.safetensors"))
        if not files:
            raise InputError(f"no safetensors weights in {d}")
        self.where = {}
        for f in files:
            self.where.update(dict.fromkeys(safetensors_keys(f), f))

    def __iter__(self):
        return iter(self.where)

    def __getitem__(self, name):
        from methods.core.safeload import safetensors_tensor

        if name not in self.where:
            raise InputError(f"weights {sorted(set(f.parent for f in self.where.values()))[0]} have no tensor {name!r}")
        return safetensors_tensor(self.where[name], name).double().numpy()


def drift(ar: str, conv: str) -> dict:
    """‖W − W_AR‖_F / ‖W_AR‖_F per module type, over all layers (float64 over safetensors tensors)."""
    import numpy as np

    a, c = _Weights(ar), _Weights(conv)
    groups = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
              "ffn": ("gate_proj", "up_proj", "down_proj")}
    out = {}
    for g, keys in groups.items():
        keys = (keys,) if isinstance(keys, str) else keys
        names = [n for n in a if any(k in n for k in keys)]
        num = den = 0.0
        for n in names:
            wa = a[n]
            num += float(np.sum((c[n] - wa) ** 2))
            den += float(np.sum(wa ** 2))
        out[g] = (num / den) ** 0.5
    out["attn"] = float(np.mean([out[k] for k in "qkvo"]))
    out["mean"] = float(np.mean([out[k] for k in ("q", "k", "v", "o", "ffn")]))
    return out


# ---------------------------------------------------------------- paper scale: lm-eval tasks
# the metric a task's accuracy is read from, first found (lm-eval metric names; gsm8k reports
# strict-match and flexible-extract, the strict one is read)
PRIMARY_METRICS = ("acc", "exact_match,strict-match", "exact_match", "pass@1", "pass_at_1")


def _primary(results: dict, task: str, tm) -> float:
    from methods.core.evaluate import metric

    for name in PRIMARY_METRICS:
        try:
            return metric(results, task, name, tm)
        except InputError:
            continue
    raise InputError(f"lm-eval results for {task!r} have none of the metrics {', '.join(PRIMARY_METRICS)}")


def _lm_eval_row(lm, tasks: list[str], tm, limit) -> dict:
    """One lm-eval run of `lm` (a methods.efficient_dlm.lm.BlockDiffusionLM) on `tasks`: the
    mean of the tasks' primary metrics (`acc`), each task's (`acc_<task>`), and the decoder's
    counters over the generation tasks (NFE, tokens per forward, tokens/s)."""
    import os

    import lm_eval

    lm.reset_stats()
    kw = {"confirm_run_unsafe_code": True} if os.environ.get("HF_ALLOW_CODE_EVAL") == "1" else {}
    out = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=tm, log_samples=False, limit=limit,
                                  bootstrap_iters=0, random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                                  fewshot_random_seed=0, **kw)
    res = {"results": out["results"], "n_samples": out.get("n-samples", {})}
    row = {f"acc_{t}": _primary(res, t, tm) for t in tasks}
    row["acc"] = sum(row.values()) / len(tasks)
    st = lm.stats
    row.update(nfe=st["nfe"] / max(1, st["rows"]), tpf=st["committed"] / max(1, st["nfe"]),
               useful_tpf=st["useful"] / max(1, st["nfe"]), wall_s=st["wall_s"],
               tokens_per_s=(st["useful"] / st["wall_s"]) if st["wall_s"] > 0 else None)
    return row


def evaluate_lm_eval(cfg: EvalConfig, hub, ar: str, convs: list[str]) -> tuple[list[dict], list[dict]]:
    """Paper scale: every model scored by lm-eval on `hub.lm_eval_tasks` through the registered
    `efficient_dlm` model class (methods/efficient_dlm/lm.py) — the AR base and the AR baselines
    (`hub.baselines`, hub ids loaded without remote code) with greedy AR decoding, each converted
    model at every confidence threshold with block-parallel decoding — so accuracy and tokens/s
    of the AR base and the converted models come from the same harness, side by side.
    Returns (rows, baseline rows)."""
    import gc
    import os

    from lm_eval.tasks import TaskManager

    from methods.core.evaluate import LM_EVAL_TASKS_ENV
    from methods.core.models import load_model

    from .lm import BlockDiffusionLM

    tasks = list(hub.lm_eval_tasks)
    if not tasks:
        raise InputError("config key 'hub.lm_eval_tasks' is empty: the paper-scale evaluation needs lm-eval tasks")
    tm = TaskManager(include_path=os.environ.get(LM_EVAL_TASKS_ENV) or None)
    common = dict(batch_size=cfg.batch_size, mc_samples=cfg.mc_samples, block=cfg.block)

    def ar_row(path, name):
        model, tok = load_model(path)
        row = {"model": name, "threshold": None, **_lm_eval_row(BlockDiffusionLM(model=model, tokenizer=tok, mode="ar",
                                                                                  **common), tasks, tm,
                                                                 cfg.lm_eval_limit)}
        print(f"eval {name}: acc {row['acc']:.3f} tokens/s {row['tokens_per_s']}", flush=True)
        del model
        gc.collect()
        return row

    rows = [ar_row(ar, "ar")]
    baselines = [{**ar_row(b, f"baseline {b}"), "hub_id": b} for b in hub.baselines]
    for c in convs:
        spec = json.loads((Path(c) / "variant.json").read_text())
        model, tok = load_model(c)
        seed = spec.get("seed", 0)
        lm = BlockDiffusionLM(model=model, tokenizer=tok, mode="dlm", spec=spec, seed=seed, **common)
        for th in cfg.thresholds:
            lm.threshold = th          # likelihoods are memoised in `lm`: they do not depend on τ
            r = _lm_eval_row(lm, tasks, tm, cfg.lm_eval_limit)
            rows.append({"model": spec["variant"], "seed": seed, "threshold": th, **r})
            print(f"eval {spec['variant']} seed {seed} τ={th}: acc {r['acc']:.3f} tpf {r['tpf']:.2f}", flush=True)
        del model, lm
        gc.collect()
    return rows, baselines
