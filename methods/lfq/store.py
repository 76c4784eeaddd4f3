"""Quantized model directories (each step writes a new, descriptively named artifact): the fake-quantized weights as a plain HF
directory (`from_pretrained` and lm-eval load it), plus `quant.safetensors` holding every
quantized linear as packed int32 codes (kernels/quant.py layout), fp16 scales and int8 zero
points (int16 for a tensor whose zeros leave the int8 range), and `quant.json` (what was done)."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from kernels import quant as kq
from methods.core.results import InputError, atomic_path

PACKED = "quant.safetensors"


def pack_records(records: dict, bits: int) -> dict[str, torch.Tensor]:
    out = {}
    for name, (codes, h16, z) in records.items():
        out[f"{name}.qweight"] = kq.pack(codes.contiguous(), bits)
        out[f"{name}.scales"] = h16.contiguous()
        zi = z.round().to(torch.int64)
        small = bool(zi.min() >= -128 and zi.max() <= 127)
        out[f"{name}.zeros"] = zi.to(torch.int8 if small else torch.int16).contiguous()
    return out


def save_quantized(model, tokenizer, records: dict, out_dir, bits: int, group_size: int, info: dict) -> None:
    from safetensors.torch import save_file

    with atomic_path(out_dir, is_dir=True) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        save_file(pack_records(records, bits), str(tmp / PACKED),
                  metadata={"bits": str(bits), "group_size": str(group_size), "layout": "kernels.quant"})
        (tmp / "quant.json").write_text(json.dumps({"bits": bits, "group_size": group_size, **info},
                                                   indent=2, sort_keys=True) + "\n")


def load_records(model_dir) -> tuple[dict, int, int]:
    """(records name → (codes, h16, z), bits, group_size) from a quantized model directory."""
    from methods.core.safeload import load_safetensors

    path = Path(model_dir) / PACKED
    if not path.is_file():
        raise InputError(f"not a quantized model directory (no {PACKED}): {model_dir}")
    tensors, meta = load_safetensors(path, metadata=True)
    try:
        bits, group = int(meta["bits"]), int(meta["group_size"])
    except (KeyError, ValueError):
        raise InputError(f"{path}: header metadata lacks integer 'bits' and 'group_size'") from None
    records = {}
    for key in tensors:
        if key.endswith(".qweight"):
            name = key[: -len(".qweight")]
            h16 = tensors[f"{name}.scales"]
            k = h16.shape[1] * group
            records[name] = (kq.unpack(tensors[key], bits, k), h16, tensors[f"{name}.zeros"].float())
    return records, bits, group


def packed_bytes(model_dir) -> int:
    return (Path(model_dir) / PACKED).stat().st_size
