"""Train the tiny "reasoning model" on the synthetic traces (ASAG, arXiv 2606.15070)."""
from __future__ import annotations

import json
from pathlib import Path

from methods.core.results import InputError, atomic_path, dumps as strict_dumps

from .config import TrainRunConfig
from .data import Vocab


def encode_rows(rows, vocab: Vocab, seq_len: int):
    """input_ids / labels [N, seq_len]; loss on the thought and answer only (not the prompt)."""
    import torch

    ids = torch.full((len(rows), seq_len), vocab.pad_token_id, dtype=torch.long)
    lab = torch.full((len(rows), seq_len), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        p, t = vocab.encode(r["prompt"]), vocab.encode(r["thought"])
        x = (p + t)[:seq_len + 1]
        ids[i, :len(x) - 1] = torch.tensor(x[:-1])
        y = torch.tensor(x[1:])
        y[:len(p) - 1] = -100
        lab[i, :len(x) - 1] = y
    return ids, lab


def hf_tokenizer(vocab: Vocab):
    """`vocab` as a transformers fast tokenizer with the same ids: whitespace-split words, each
    one token (a word outside the vocabulary is an error, as in `Vocab.encode`), decoded joined
    by spaces; pad and eos as its special tokens. Saved in the model directory, it makes the
    directory load with `AutoTokenizer` (and lm-eval's `hf` model) like any other of the DAG."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # the unk token is not in the vocabulary: the WordLevel model then refuses unknown words
    tok = Tokenizer(models.WordLevel(vocab=dict(vocab.ids), unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=vocab.words[vocab.pad_token_id],
                                   eos_token=vocab.words[vocab.eos_token_id], clean_up_tokenization_spaces=False)


def train_tiny(cfg: TrainRunConfig, data_dir: str | Path, out_dir: str | Path, seed: int = 0) -> dict:
    import torch

    from methods.core.models import build_model
    from methods.core.train import evaluate_loss, train

    if cfg.hub_id is not None:
        # paper scale: the model is a hub LRM; record which one (downloaded by the decode step)
        with atomic_path(out_dir, is_dir=True) as tmp:
            (tmp / "hub.json").write_text(json.dumps({"hub_id": cfg.hub_id}))
        return {"hub_id": cfg.hub_id}
    vocab = Vocab(json.loads((Path(data_dir) / "vocab.json").read_text()))
    rows = [json.loads(l) for l in (Path(data_dir) / "train.jsonl").read_text().splitlines()]
    if cfg.model.max_seq_len < cfg.seq_len + 60:
        raise InputError(f"config key 'train.model.max_seq_len' must cover seq_len + decode slack, got {cfg.model.max_seq_len}")
    ids, lab = encode_rows(rows, vocab, cfg.seq_len)
    n_val = min(256, len(rows) // 10)
    val = [{"input_ids": ids[i:i + 64], "labels": lab[i:i + 64]} for i in range(0, n_val, 64)]
    tr_ids, tr_lab = ids[n_val:], lab[n_val:]
    bs = cfg.train.batch_size

    def batch(step):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        j = torch.randint(0, len(tr_ids), (bs,), generator=g)
        return {"input_ids": tr_ids[j], "labels": tr_lab[j]}

    model = build_model(cfg.model, vocab, seed)
    cfg.train.seed = seed
    rows_log = train(model, batch, cfg.train, eval_fn=lambda: {"val_loss": evaluate_loss(model, val)})
    with atomic_path(out_dir, is_dir=True) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        hf_tokenizer(vocab).save_pretrained(tmp)  # tokenizer.json + tokenizer_config.json
        (tmp / "vocab.json").write_text(json.dumps(vocab.words))
        (tmp / "train_log.jsonl").write_text("".join(strict_dumps(r) + "\n" for r in rows_log))
    n_params = sum(p.numel() for p in model.parameters())
    return {"val_loss": rows_log[-1].get("val_loss"), "n_params": n_params}


def load_tiny(model_dir: str | Path):
    """(model with eager attention, vocab) from a directory written by `train_tiny`."""
    from transformers import LlamaForCausalLM

    d = Path(model_dir)
    if (d / "hub.json").is_file():
        raise InputError(f"{d} names a hub model (decoded by methods.asag.hub, not as the tiny model)")
    if not (d / "config.json").is_file():
        raise InputError(f"not a model directory (no config.json): {d}")
    model = LlamaForCausalLM.from_pretrained(str(d), attn_implementation="eager")
    model.eval()
    return model, Vocab(json.loads((d / "vocab.json").read_text()))
