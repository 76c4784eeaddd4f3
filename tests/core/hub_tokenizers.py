"""Byte-level BPE tokenizers with the Qwen2 and Llama-3 families' conventions, trained with the
`tokenizers` library, saved with save_pretrained and reloaded with AutoTokenizer — the shape
in which hub tokenizers reach our code (tests only; no hub access):
- "qwen": <|endoftext|> is both eos and pad, no bos, no unk, Qwen2's pre-tokenizer regex
  (punctuation merges with the newline after it: ".\n" is one token, as in Qwen's vocab);
- "llama3": bos <|begin_of_text|> prepended by the post-processor, eos <|end_of_text|>, no
  pad, no unk, Llama-3's regex.
Neither has a mask token."""
from __future__ import annotations

from pathlib import Path

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = ["The cat sat.\nThe dog ran.\nA bird flew.\n", "x = 1;\ny = 2;\nprint(x + y).\n",
          "Answer: 42.\nAnswer: 17.\nQ: why?\nA: because.\n"] * 40


def build_family_tokenizer(out_dir: str | Path, family: str):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    regex = QWEN2_REGEX if family == "qwen" else LLAMA3_REGEX
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = (["<|endoftext|>", "<|im_start|>", "<|im_end|>"] if family == "qwen"
                else ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if family == "qwen":
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                       pad_token="<|endoftext|>")
    else:
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token="<|end_of_text|>")
    fast.save_pretrained(Path(out_dir) / family)
    return AutoTokenizer.from_pretrained(str(Path(out_dir) / family))
