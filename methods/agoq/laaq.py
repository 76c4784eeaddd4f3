"""LAAQ: layer-aware quantization of the activations autograd saves for backward
(arXiv 2605.00539, abstract: bit-width per layer type and pipeline stage, ~4 bits on average; the
rest of this design is inferred, as only the abstract was available).

`SavedActivationQuantizer(model, policy)` is a context manager around the forward pass: every
tensor the autograd graph saves inside it goes through `pack`, which quantizes it with the
bit-width of (the module scope it was saved in, the virtual pipeline stage of its layer), and
`unpack` dequantizes it just before backward uses it. Forward values are untouched, so only
the gradients see quantization error.

Scopes (tags) of a Llama block, from the innermost module on a tag stack pushed/popped by
forward pre/post hooks:
    norm       RMSNorm inputs (input/post-attention/final norm)
    attn_in    input of q/k/v projections        o_in     input of the output projection
    attn_core  RoPE and SDPA's saved q, k, v, out, lse (inside attention, outside the linears)
    mlp_in     input of gate/up projections      mlp_inner  SwiGLU internals (SiLU input, product operands)
    down_in    input of the down projection      head     input of lm_head
    other      anything else (the decoder layer body, the embedding)
Bits 16 keep a tensor as it is (counted at 2 bytes/element as if bf16, the GPU training dtype).

Pitfalls of saved-tensor hooks and how they are handled: weights saved by linears/norms are
skipped by storage pointer; integer and tiny (< `min_numel`) tensors are skipped; the post
hook returns None. A tensor saved several times (the q/k/v projections all save the same
input) is quantized and counted once, as autograd itself keeps one reference.
"""
from __future__ import annotations

import weakref
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from methods.agoq.config import TAGS

from .quant import Packed, group_dequant, group_quant

KEEP = 16  # "bits" meaning: not quantized


def module_tag(name: str, module) -> str | None:
    """The LAAQ tag of a Llama submodule (by attribute name and class), or None (no scope)."""
    last = name.rsplit(".", 1)[-1]
    cls = type(module).__name__
    if cls.endswith("RMSNorm"):
        return "norm"
    return {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "o_in",
            "gate_proj": "mlp_in", "up_proj": "mlp_in", "down_proj": "down_in", "lm_head": "head",
            "self_attn": "attn_core", "mlp": "mlp_inner"}.get(last)


@dataclass
class BitPolicy:
    """Bits per tag, with per-stage overrides (pipeline-stage policy: the mechanism is in the
    abstract, the rule is our inferred design)."""
    bits: dict
    stage_overrides: list = field(default_factory=list)  # [{stage, tag, bits}]

    def __post_init__(self):
        for t, b in self.bits.items():
            if t not in TAGS or b not in (2, 4, 8, KEEP):
                raise ValueError(f"bad policy entry {t}: {b} (tags {TAGS}, bits 2/4/8/16)")
        self._over = {(o["stage"], o["tag"]): o["bits"] for o in self.stage_overrides}

    def __call__(self, tag: str, stage: int) -> int:
        return self._over.get((stage, tag), self.bits.get(tag, KEEP))

    @classmethod
    def uniform(cls, bits: int) -> "BitPolicy":
        return cls({t: bits for t in TAGS})


class SavedActivationQuantizer:
    """Saved-tensor hooks with a bit policy; per forward it measures the bytes the autograd
    graph really holds for activations (`stats`), per tag."""

    def __init__(self, model, policy: BitPolicy, n_stages: int = 1, group: int = 128,
                 stochastic: bool = False, min_numel: int = 256, seed: int = 0,
                 track_originals: bool = False):
        self.policy, self.group, self.stochastic, self.min_numel = policy, group, stochastic, min_numel
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        # stochastic rounding draws on the device of the activations (the model's)
        dev = next(model.parameters()).device
        self.gen = torch.Generator(device=dev).manual_seed(seed)
        self.track = track_originals
        self.stack: list[str] = []
        self.stage = 0
        layers = list(model.model.layers)
        self.handles = []
        for i, layer in enumerate(layers):
            stage = i * n_stages // len(layers)
            self.handles.append(layer.register_forward_pre_hook(self._set_stage(stage)))
        last = n_stages - 1
        self.handles.append(model.model.norm.register_forward_pre_hook(self._set_stage(last)))
        self.handles.append(model.model.embed_tokens.register_forward_pre_hook(self._set_stage(0)))
        for name, m in model.named_modules():
            tag = module_tag(name, m)
            if tag is not None:
                self.handles.append(m.register_forward_pre_hook(self._push(tag)))
                self.handles.append(m.register_forward_hook(self._pop))
        self.reset()

    def _set_stage(self, stage):
        def hook(module, args):
            self.stage = stage
        return hook

    def _push(self, tag):
        def hook(module, args):
            self.stack.append(tag)
        return hook

    def _pop(self, module, args, output):
        self.stack.pop()
        return None  # a post hook that returns anything else replaces the module output

    def remove(self):
        for h in self.handles:
            h.remove()

    def reset(self):
        # bytes held (packed storage), bf16-equivalent bytes of the originals, element counts
        self.stats = {"held_bytes": defaultdict(int), "bf16_bytes": defaultdict(int),
                      "fp_bytes": defaultdict(int), "numel": defaultdict(int), "n_tensors": 0,
                      "bits_numel": defaultdict(int)}
        self.cache: dict = {}
        self.originals: list = []

    # ------------------------------------------------------------------ hooks ----
    def pack(self, t: torch.Tensor):
        if (not t.is_floating_point() or t.numel() < self.min_numel
                or t.untyped_storage().data_ptr() in self.param_ptrs):
            return t
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()),
               t._version)
        if key in self.cache:
            return self.cache[key][0]
        tag = self.stack[-1] if self.stack else "other"
        bits = self.policy(tag, self.stage)
        if bits >= KEEP:
            packed, held = t, t.numel() * t.element_size()
        else:
            packed = group_quant(t, bits, self.group, self.stochastic, self.gen)
            held = packed.nbytes
        if self.track:
            self.originals.append((weakref.ref(t), bits))
        # the cache keeps `t` alive only until the forward ends (reset), like the graph does
        self.cache[key] = (packed, t)
        st = self.stats
        st["n_tensors"] += 1
        st["numel"][tag] += t.numel()
        st["fp_bytes"][tag] += t.numel() * t.element_size()
        st["bf16_bytes"][tag] += 2 * t.numel()
        # an unquantized tensor would be bf16 on the GPU: count it at 2 B/element
        st["held_bytes"][tag] += held if bits < KEEP else 2 * t.numel()
        st["bits_numel"][bits] += t.numel()
        return packed

    @staticmethod
    def unpack(p):
        return group_dequant(p) if isinstance(p, Packed) else p

    def __enter__(self):
        self.reset()
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        self.cache = {}  # from here on only the graph holds the packed tensors
        self.stack.clear()
        return False

    def summary(self) -> dict:
        st = self.stats
        held, bf16 = sum(st["held_bytes"].values()), sum(st["bf16_bytes"].values())
        return {"held_bytes": held, "bf16_bytes": bf16, "fp32_bytes": sum(st["fp_bytes"].values()),
                "ratio_vs_bf16": held / max(1, bf16), "n_tensors": st["n_tensors"],
                "numel_by_tag": dict(st["numel"]), "held_by_tag": dict(st["held_bytes"]),
                "numel_by_bits": {str(k): v for k, v in st["bits_numel"].items()},
                "avg_bits": 16 * held / max(1, bf16)}
