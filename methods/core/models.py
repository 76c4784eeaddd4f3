"""The tiny model zoo: decoder LMs as HF `PreTrainedModel`s.

Stock architectures are built from their transformers config (Llama: RMSNorm, RoPE, SwiGLU,
optionally tied embeddings), so a checkpoint is a plain `save_pretrained` directory
(safetensors + config.json + tokenizer files) that `AutoModelForCausalLM.from_pretrained` and
`lm_eval --model hf --model_args pretrained=<dir>` load with no custom code. Papers with custom
blocks register their config/model classes with the Auto classes through `register_arch`
(never `trust_remote_code`); `register_all` registers every one of them (`load_model` and the
`icml26-lm-eval` console script, methods/core/lm_eval_cli.py, call it first).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import PosInt, Positive, key_error
from .results import InputError, atomic_path


@dataclass
class ModelConfig:
    """Hyper-parameters of a tiny Llama-style decoder (paper scale names hub ids instead).
    A scale file's `model` sub-section; the Checks apply when it is read (`from_dict`)."""
    d_model: PosInt = 64
    n_layers: PosInt = 3
    n_heads: PosInt = 4
    n_kv_heads: PosInt | None = None        # None = n_heads (multi-head attention)
    d_ff: PosInt = 172
    max_seq_len: PosInt = 128
    tie_embeddings: bool = True
    rope_theta: Positive = 10000.0
    norm_eps: Positive = 1e-5
    init_std: Positive = 0.02

    def check(self) -> None:
        """Rules across fields, run when a scale file is read (`methods.core.config.run_check`)."""
        if self.d_model % self.n_heads:
            raise key_error("n_heads", f"{self.n_heads} heads do not divide d_model={self.d_model}")
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise key_error("n_kv_heads", f"{self.n_kv_heads} key/value heads do not divide n_heads={self.n_heads}")


def llama_config(cfg: ModelConfig, tokenizer):
    from transformers import LlamaConfig

    if cfg.d_model % cfg.n_heads:
        raise InputError(f"d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads or cfg.n_heads, max_position_embeddings=cfg.max_seq_len,
        rms_norm_eps=cfg.norm_eps, rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        tie_word_embeddings=cfg.tie_embeddings, initializer_range=cfg.init_std,
        attention_bias=False, mlp_bias=False, use_cache=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )


def build_model(cfg: ModelConfig, tokenizer, seed: int):
    """A freshly initialised LlamaForCausalLM; the init depends on `seed` only."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(cfg, tokenizer))
    # sdpa is the fast path on CPU and GPU; probes that need attention maps switch to eager
    model.config._attn_implementation = "sdpa"
    return model


def register_arch(config_cls, model_cls) -> None:
    """Make a custom architecture loadable by `AutoModelForCausalLM` (import-time registration).
    A module that calls it must be listed in `ARCH_MODULES`, so that `register_all` finds it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
    AutoModelForCausalLM.register(config_cls, model_cls, exist_ok=True)


# Every module that calls `register_arch` at import (tests/core/test_model_dirs_load.py checks
# that the list is complete by scanning methods/ for the calls).
ARCH_MODULES = ("methods.dag_moe.model", "methods.siamesenorm.model")


def register_all() -> list[str]:
    """Register every custom architecture of the project with the transformers Auto classes
    (by importing the modules that define them), so that `AutoConfig` / `AutoModelForCausalLM`
    `.from_pretrained` and lm-eval's `hf` model load any model directory the DAG writes, with
    no `trust_remote_code`. Idempotent; returns the registered `model_type`s, sorted."""
    import importlib

    from transformers import CONFIG_MAPPING

    for name in ARCH_MODULES:
        importlib.import_module(name)
    return sorted(t for t, cls in CONFIG_MAPPING._extra_content.items() if cls.__module__ in ARCH_MODULES)


def save_model(model, tokenizer, out_dir: str | Path, extra_files: dict[str, str] | None = None,
               state_dict: dict | None = None) -> None:
    """Atomically write an HF model directory: safetensors weights, config, tokenizer.
    `state_dict` replaces the model's own weights: the full weights gathered from FSDP shards
    (`distributed.full_state_dict`), saved by rank 0 only."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
        tokenizer.save_pretrained(tmp)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)


def save_trained(model, tokenizer, out_dir: str | Path, *, log_path: str | Path | None = None,
                 extra_files: dict[str, str] | None = None) -> None:
    """Save a model after `train.train`, under torchrun too: every rank joins the gathering of
    FSDP shards, rank 0 alone writes the directory — with the training log `log_path` (which
    exists on rank 0 only) moved in as train_log.jsonl — and the others wait, so that no rank
    exits while the model is being written."""
    from . import distributed

    weights = distributed.weights_to_save(model)
    if distributed.is_main():
        files = dict(extra_files or {})
        if log_path is not None:
            files["train_log.jsonl"] = Path(log_path).read_text()
        save_model(model, tokenizer, out_dir, state_dict=weights, extra_files=files)
        if log_path is not None:
            Path(log_path).unlink()
    distributed.barrier()


def load_model(path: str | Path, dtype=None, attn_implementation: str | None = None,
               training: bool = False):
    """Load (model, tokenizer) from a local directory, or a hub id at paper scale, onto the
    active runtime's device (`runtime.current()`), in its inference dtype, or in its training
    dtype (fp32 master weights under the default policy) when `training`. An explicit `dtype`
    wins. Weights load straight onto the GPU (no full CPU copy of a large model)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .runtime import current

    p = Path(path)
    if p.exists() and not (p / "config.json").is_file():
        raise InputError(f"not a model directory (no config.json): {p}")
    register_all()  # a directory of any of the project's custom architectures loads here
    rt = current()
    kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
    if rt.is_cuda:
        kw["device_map"] = str(rt.device)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=dtype or rt.weight_dtype(training), use_safetensors=True, **kw)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, SafetensorError) as e:  # truncated/corrupt weights too
        raise InputError(f"cannot load model {path}: {str(e).splitlines()[0]}") from None
    model.eval()
    return model, tokenizer


def hub_or_trained_base(hub_id: str | None, out_dir: str | Path, train_fn) -> dict:
    """A base-LM DAG step: at paper scale (`hub_id` set) the hub model and its tokenizer are saved
    as they are, in the checkpoint's own dtype, with no training, and {"hub_id": ...} is returned;
    otherwise `train_fn()` trains the tiny base and returns (model, tokenizer, summary,
    extra_files), the model is saved (atomically, `extra_files` such as the training log inside
    the directory) and `summary` returned."""
    if hub_id is not None:
        if not str(hub_id).strip():
            raise InputError("config key 'hub_id' is empty (null trains the tiny base)")
        model, tok = load_model(hub_id, dtype="auto")
        save_model(model, tok, out_dir)
        return {"hub_id": hub_id}
    model, tok, summary, extra_files = train_fn()
    save_model(model, tok, out_dir, extra_files=extra_files)
    return summary
