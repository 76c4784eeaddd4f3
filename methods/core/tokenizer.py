"""Tokenizer training with the `tokenizers` library, saved in HF format.

Two kinds: `char` (one token per character, the vocabulary being the corpus's sorted alphabet:
the tiny worlds use a ~45-symbol alphabet, so a model sees every character and exact-match
answers are not blurred by merges) and `bpe` (byte-level BPE trained with `BpeTrainer`, for
corpora with an open vocabulary). Both save a `PreTrainedTokenizerFast`
that `AutoTokenizer.from_pretrained` and lm-eval's `hf` model load.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = [PAD, EOS, UNK]


def train_tokenizer(texts: Iterable[str], kind: str = "char", vocab_size: int = 0):
    """Return a trained `PreTrainedTokenizerFast`. `vocab_size` is used by `bpe` only."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "char":
        # the vocabulary is the sorted alphabet: ids must not depend on frequency ties, whose
        # order is not guaranteed across processes
        alphabet = sorted({c for text in texts for c in text})
        vocab = {t: i for i, t in enumerate(SPECIALS + alphabet)}
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
        # every character, newline included, is its own "word"
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                       unk_token=UNK, padding_side="right")
    if kind == "bpe":
        if vocab_size <= len(SPECIALS) + 256:
            raise ValueError(f"bpe vocab_size must exceed {len(SPECIALS) + 256}, got {vocab_size}")
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r} (char or bpe)")
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                   unk_token=UNK, padding_side="right")


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    from .results import atomic_path

    with atomic_path(out_dir, is_dir=True) as tmp:
        tokenizer.save_pretrained(tmp)


def load_tokenizer(path: str | Path):
    """Load a tokenizer from a local directory or, at paper scale, a hub id."""
    from transformers import AutoTokenizer

    from .results import InputError

    p = Path(path)
    if p.exists() and not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
        raise InputError(f"no tokenizer files in {p}")
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load tokenizer {path}: {str(e).splitlines()[0]}") from None


# ---------------------------------------------------------------- hub-tokenizer conventions ----
# Hub tokenizers break assumptions our tiny char tokenizer satisfies (pad, eos, unk all
# present; "\n" one vocabulary entry): Qwen2/3 use <|endoftext|> as both eos and pad and have
# no unk; Llama-3 has no pad; neither has a mask token; byte-level BPE spells "\n" as "Ċ" and
# merges it into tokens such as ".Ċ". Methods ask for what they need through these functions
# instead of reading `tok.<x>_token_id` and getting a silent None.

_TOKEN_ROLES = ("pad", "eos", "bos", "unk", "mask", "sep", "cls")


def _tok_name(tokenizer) -> str:
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__


def require_tokens(tokenizer, names, needed_by: str = "") -> dict[str, int]:
    """{role: id} for special-token roles a method needs ("pad", "eos", "mask", ...; "_token"
    suffix optional); one-line InputError naming the first missing one."""
    from .results import InputError

    out = {}
    for name in names:
        role = name.removesuffix("_token")
        if role not in _TOKEN_ROLES:
            raise InputError(f"unknown special-token role {name!r} (one of {', '.join(_TOKEN_ROLES)})")
        tid = getattr(tokenizer, f"{role}_token_id", None)
        if tid is None:
            why = f" (needed by {needed_by})" if needed_by else ""
            raise InputError(f"tokenizer {_tok_name(tokenizer)!r} has no {role} token{why}")
        out[role] = tid
    return out


def ensure_pad(tokenizer) -> int:
    """The id to pad with: the tokenizer's pad, else its eos (Llama-3 has no pad). The tokenizer
    is not modified (its `pad_token` stays as shipped, so saving it changes nothing); padded
    positions must be masked by the caller, which is what makes any id safe there."""
    from .results import InputError

    if tokenizer.pad_token_id is not None:
        return tokenizer.pad_token_id
    if tokenizer.eos_token_id is not None:
        return tokenizer.eos_token_id
    raise InputError(f"tokenizer {_tok_name(tokenizer)!r} has neither a pad nor an eos token to pad with")


def ensure_mask_token(tokenizer, model=None, token: str = "<|mask|>") -> int:
    """The mask token's id: the tokenizer's own, else `token` added as its special mask token
    (id = len(tokenizer) before adding; saving the tokenizer keeps it). With `model`: the
    embedding row of a newly added token is set to the mean of the rows of the tokens that
    existed before — a neutral start that leaves every old token's embedding and logit row as
    it was — growing the embeddings first where the id is past them (never shrinking: Qwen pads
    its matrix past the vocabulary, so its new id may already have an untrained row); the same
    for an untied output head. Without a model the caller owns the embedding size."""
    import torch

    from .results import InputError

    tid = tokenizer.mask_token_id
    added = tid is None
    if added:
        if token in tokenizer.get_vocab():     # text containing it would read as masks
            raise InputError(f"tokenizer {_tok_name(tokenizer)!r}: mask token {token!r} is already an "
                             f"ordinary token (id {tokenizer.convert_tokens_to_ids(token)}); pass another `token`")
        tid = len(tokenizer)
        tokenizer.add_special_tokens({"mask_token": token})
        if tokenizer.mask_token_id != tid:
            raise InputError(f"tokenizer {_tok_name(tokenizer)!r}: the added mask token got id "
                             f"{tokenizer.mask_token_id}, not the next id {tid}")
    if model is None:
        return tid
    emb = model.get_input_embeddings()
    rows = emb.weight.shape[0]
    if not added and tid < rows:
        return tid                                   # an existing mask token keeps its row
    out = model.get_output_embeddings()
    tied = out is not None and out.weight is emb.weight
    if tid >= rows:
        # mean_resizing=False: transformers would sample the new rows around the mean; we set them
        model.resize_token_embeddings(tid + 1, mean_resizing=False)
    # rows [0, n_old) are the old tokens'; [n_old, tid] the new one (and any gap grown with it)
    n_old = min(rows, tid)
    with torch.no_grad():
        w = model.get_input_embeddings().weight
        w[n_old:tid + 1] = w[:n_old].mean(0)
        out = model.get_output_embeddings()
        if out is not None and not tied:
            out.weight[n_old:tid + 1] = out.weight[:n_old].mean(0)
            if getattr(out, "bias", None) is not None:
                out.bias[n_old:tid + 1] = out.bias[:n_old].mean(0)
    return tid


def token_id(tokenizer, text: str) -> int:
    """The id of the single token `text` encodes to ("\\n" is "Ċ" in byte-level BPE, so
    `convert_tokens_to_ids("\\n")` is None there); InputError when it is not exactly one token.
    For an id-based stop this is the stand-alone token only: merged forms (".Ċ") need text
    stops (`stop_criteria`)."""
    from .results import InputError

    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise InputError(f"tokenizer {_tok_name(tokenizer)!r}: {text!r} is {len(ids)} tokens, not one")
    return ids[0]


def stop_index(tokenizer, ids, stops) -> int:
    """How many of the generated `ids` to keep: up to and including the token with which the
    decoded text first contains one of the text `stops`; len(ids) when it never does."""
    ids = list(ids)
    if not stops or not any(s in tokenizer.decode(ids) for s in stops):
        return len(ids)
    # a token appends its text to the decoded prefix (byte-level BPE: an incomplete UTF-8
    # character shows as U+FFFD until its last byte, which no stop contains), so "contains a
    # stop" is monotone in the prefix length: bisect for the first prefix that does
    lo, hi = 1, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in tokenizer.decode(ids[:mid]) for s in stops):
            hi = mid
        else:
            lo = mid + 1
    return lo


def stop_criteria(tokenizer, stops, prompt_len: int):
    """A transformers `StoppingCriteriaList` for `generate(stopping_criteria=...)` that ends
    each row once the text decoded from its generated tokens (positions >= `prompt_len`, the
    padded prompt width) contains one of the text `stops` — where `stop_index` cuts it.
    Text, not ids: a stop merged into a bigger BPE token (".\\n") is caught. Unlike
    transformers' own `stop_strings` (StopStringCriteria), this works with any tokenizer that
    decodes (StopStringCriteria cannot index our WordLevel char tokenizer). Earlier steps
    found no stop, so only a stop that ends in the newest token can be new: each step decodes
    the last 4·len(longest stop) + 2 tokens of each unfinished row (a token holds at least one
    byte and a character at most four), O(1) per step instead of the whole continuation."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    stops = tuple(stops)
    window = 4 * max((len(s) for s in stops), default=0) + 2

    class StopOnText(StoppingCriteria):
        def __init__(self):
            self.done = None

        def __call__(self, input_ids, scores, **kwargs):
            if self.done is None or input_ids.shape[1] <= prompt_len + 1:   # a new generate call
                self.done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            for i in (~self.done).nonzero().flatten().tolist():
                text = tokenizer.decode(input_ids[i, max(prompt_len, input_ids.shape[1] - window):].tolist())
                self.done[i] = any(s in text for s in stops)
            return self.done.clone()

    return StoppingCriteriaList([StopOnText()])
