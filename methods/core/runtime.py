"""The runtime spec: where and in what precision every model of a step runs.

One spec per scale, read from the top-level `runtime:` section of `config/scales/<scale>.yaml`
and handed to each torch step as `--runtime JSON` (see `cli.config_step`). The CLI activates
it before the step runs; `models.load_model`/`build_model`, `train.train`,
`evaluate.run_lm_eval` and the HF LLM backend read the active spec, so a paper step that goes
through them needs no device code of its own.

Policy (`resolve`):
- device `auto` → `cuda` when `torch.cuda.is_available()`, else `cpu`; `cpu`/`cuda`/`cuda:N`
  as given. Asking for `cuda` on a machine without it is an error, not a silent CPU run.
- dtype `auto` → bf16 on a GPU that supports it (Ampere and later), else fp32 (fp16 training
  would need loss scaling, which the trainer does not do); `fp32`/`bf16`/`fp16` as given.
- Training keeps fp32 master weights and runs forward/backward under autocast in the compute
  dtype when `master_fp32` (the mixed-precision recipe of Micikevicius et al., 2018, with bf16
  so no loss scaling is needed); inference loads weights directly in the compute dtype.
- `compile`: wrap training/inference forwards in `torch.compile` (off unless measured to pay).
- `distributed`: the strategy `train.train` uses when the step was launched by `torchrun` with
  several ranks (`distributed.init`): `ddp` (replicas, averaged gradients) or `fsdp` (FSDP2,
  parameters, gradients and optimizer state sharded per decoder layer, for models that do not
  fit one GPU). A plain `python -m` launch is one process whatever this says.
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass

from .results import InputError

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class RuntimeSpec:
    device: str = "cpu"          # auto | cpu | cuda | cuda:N
    dtype: str = "fp32"          # auto | fp32 | bf16 | fp16
    master_fp32: bool = True     # training: fp32 weights + autocast in `dtype`
    compile: bool = False        # torch.compile the model's forward
    seed: int = 0                # seeds torch/numpy/random at activation; steps reseed with their own
    distributed: str = "ddp"     # strategy when launched with several ranks (torchrun): ddp | fsdp

    def __post_init__(self):
        dev = self.device
        if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
            raise InputError(f"config key 'runtime.device': {dev!r} is not auto, cpu, cuda or cuda:N")
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise InputError(f"config key 'runtime.dtype': {self.dtype!r} is not auto, fp32, bf16 or fp16")
        if self.distributed not in ("ddp", "fsdp"):
            raise InputError(f"config key 'runtime.distributed': {self.distributed!r} is not ddp or fsdp")


@dataclass(frozen=True)
class Runtime:
    """A resolved spec: concrete torch device and dtypes."""
    spec: RuntimeSpec
    device: object               # torch.device
    compute_dtype: object        # torch.dtype of matmuls (autocast / inference weights)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def weight_dtype(self, training: bool):
        """Parameters' dtype: fp32 master weights when training with `master_fp32`."""
        import torch

        return torch.float32 if training and self.spec.master_fp32 else self.compute_dtype

    def autocast(self, training: bool = True):
        """Autocast to the compute dtype where weights are kept in fp32; a no-op in fp32."""
        import torch

        if self.compute_dtype == torch.float32 or self.weight_dtype(training) == self.compute_dtype:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def place(self, model, training: bool = False):
        """Move a model to the device in the dtype the policy gives for training or inference.
        Floating-point tensors only (`Module.to`): integer buffers (packed quantized weights)
        keep theirs. A float64 model is a deliberate numerics choice (closed-form tests) and
        keeps its precision."""
        import torch

        p = next(model.parameters(), None)
        if p is not None and p.dtype == torch.float64:
            return model.to(device=self.device)
        return model.to(device=self.device, dtype=self.weight_dtype(training))

    def to_device(self, batch):
        """A batch (tensor, or dict/list of tensors) on the runtime device."""
        import torch

        if isinstance(batch, torch.Tensor):
            return batch.to(self.device, non_blocking=True)
        if isinstance(batch, dict):
            return {k: self.to_device(v) for k, v in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(self.to_device(v) for v in batch)
        return batch

    def maybe_compile(self, model):
        if not self.spec.compile:
            return model
        import torch

        return torch.compile(model)


def resolve(spec: RuntimeSpec) -> Runtime:
    import torch

    dev = spec.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    elif dev.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"runtime.device is {dev!r} but CUDA is not available on this machine")
    device = torch.device(dev)
    name = spec.dtype
    if name == "auto":
        if device.type != "cuda":
            name = "fp32"
        else:
            name = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type == "cpu" and name == "fp16":
        raise InputError("runtime.dtype fp16 is not supported on CPU (use fp32 or bf16)")
    return Runtime(spec, device, getattr(torch, _DTYPES[name]))


_ACTIVE: Runtime | None = None
ENV = "ICML26_RUNTIME"  # JSON spec inherited by subprocesses (torchrun workers, servers)


def parse(text: str | dict | None) -> RuntimeSpec:
    """A RuntimeSpec from the `--runtime` JSON (or a dict); empty → the CPU/fp32 default."""
    from .config import from_dict

    if text is None or text == "":
        return RuntimeSpec()
    if isinstance(text, str):
        try:
            text = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"--runtime is not valid JSON: {e}") from None
    return from_dict(RuntimeSpec, text, "runtime")


def activate(spec: RuntimeSpec | str | dict | None) -> Runtime:
    """Make `spec` the process's runtime: resolve it, seed the RNGs, and export it to child
    processes. Returns the resolved runtime."""
    global _ACTIVE
    if not isinstance(spec, RuntimeSpec):
        spec = parse(spec)
    rt = resolve(spec)
    import random

    import numpy as np
    import torch

    random.seed(spec.seed)
    np.random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    if rt.is_cuda:
        torch.cuda.set_device(rt.device)
        # TF32 matmuls on Ampere+: the fp32 paths (master-weight updates, fp32 evals) keep
        # their precision where it matters and run at tensor-core speed elsewhere
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    os.environ[ENV] = json.dumps(asdict(spec), sort_keys=True)
    _ACTIVE = rt
    return rt


def current() -> Runtime:
    """The active runtime; without `activate`, the spec in $ICML26_RUNTIME or CPU/fp32."""
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = resolve(parse(os.environ.get(ENV)))
    return _ACTIVE


def bind(device) -> Runtime:
    """Make the active runtime run on `device` (a torchrun worker's own GPU, see `distributed`),
    keeping its spec and dtype policy."""
    import dataclasses

    global _ACTIVE
    _ACTIVE = dataclasses.replace(current(), device=device)
    return _ACTIVE


def reset() -> None:
    """Forget the active runtime (tests)."""
    global _ACTIVE
    _ACTIVE = None
    os.environ.pop(ENV, None)
