"""A Skywork-o1 Open PRM (Skywork/Skywork-o1-Open-PRM-Qwen-2.5-1.5B, the verifier of UniScale's
paper setting, arXiv 2605.30898) read through its documented interface, without remote code.

The checkpoint is a Qwen2 decoder plus a value head (`v_head.summary`, Linear(hidden, 1)) on the
last hidden state (SkyworkAI/skywork-o1-prm-inference, model_utils/prm_model.py). Input
(model_utils/io_utils.py `prepare_input`, step token "\\n"): bos + problem + "\\n", then each step of
the response (split on "\\n") followed by the "\\n" token; the reward of a step is
sigmoid(v_head(h)) at that step's "\\n" token (`derive_step_rewards`). Here the Qwen2 base is built with
`transformers.Qwen2Model` from the checkpoint's config and the value head read from its weight files
(safetensors, or a PyTorch .bin as the hub repository ships) under the checkpoint's own names.
"""
from __future__ import annotations

from pathlib import Path

from methods.core.results import InputError

STEP = "\n"
HEAD_W, HEAD_B = "v_head.summary.weight", "v_head.summary.bias"


def resolve(path_or_id: str | Path) -> Path:
    """A local checkpoint directory for a path or a hub id (the hub cache; no remote code)."""
    p = Path(path_or_id)
    if p.exists():
        if not (p / "config.json").is_file():
            raise InputError(f"not a model directory (no config.json): {p}")
        return p
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(path_or_id), allow_patterns=["*.json", "*.safetensors", "*.bin",
                                                                       "*.txt", "*.model"]))
    except Exception as e:  # noqa: BLE001 (hub errors have many types; one line names the id)
        raise InputError(f"cannot fetch PRM {path_or_id}: {str(e).splitlines()[0]}") from None


def _weight_files(d: Path) -> list[Path]:
    st = sorted(d.glob("*.safetensors"))
    return st or sorted(d.glob("pytorch_model*.bin"))


def read_state(d: Path) -> dict:
    """Every tensor of the checkpoint's weight files, under its own names."""
    from methods.core.safeload import load_pt, load_safetensors

    files = _weight_files(d)
    if not files:
        raise InputError(f"no weight files (*.safetensors or pytorch_model*.bin) in {d}")
    state = {}
    for f in files:
        state.update(load_safetensors(f) if f.suffix == ".safetensors" else load_pt(f, keys=()))
    return state


def has_value_head(path_or_id: str | Path) -> bool:
    """Whether the checkpoint carries a PRM value head (`v_head.summary.weight`)."""
    d = resolve(path_or_id)
    for f in _weight_files(d):
        if f.suffix == ".safetensors":
            from methods.core.safeload import safetensors_keys

            if HEAD_W in safetensors_keys(f):
                return True
        elif HEAD_W in read_state(d):
            return True
    return False


class SkyworkPRM:
    """Qwen2 base + value head; `__call__(input_ids, attention_mask)` → the value-head logit of
    every position (float32); `config` is the base's (the cost model reads it)."""

    def __init__(self, base, head):
        self.base, self.head = base, head
        self.config = base.config

    def parameters(self):
        yield from self.base.parameters()
        yield from self.head.parameters()

    @property
    def device(self):
        return self.head.weight.device

    def __call__(self, input_ids, attention_mask=None):
        import torch

        with torch.no_grad():
            h = self.base(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.head(h.float()).squeeze(-1)


def load_prm(path_or_id: str | Path, dtype=None):
    """(SkyworkPRM, tokenizer) of a Skywork-style PRM checkpoint; a checkpoint without a value
    head is an InputError naming it."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2Model

    from methods.core.runtime import current

    d = resolve(path_or_id)
    state = read_state(d)
    if HEAD_W not in state:
        raise InputError(f"{path_or_id}: no PRM value head ({HEAD_W!r} not in its weights)")
    try:
        cfg = Qwen2Config.from_pretrained(str(d))
        tok = AutoTokenizer.from_pretrained(str(d))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load PRM {path_or_id}: {str(e).splitlines()[0]}") from None
    base = Qwen2Model(cfg)
    body = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    missing, unexpected = base.load_state_dict(body, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    if missing or unexpected:
        raise InputError(f"{path_or_id}: weights do not match its Qwen2 config (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]})")
    w = state[HEAD_W].float()
    head = torch.nn.Linear(w.shape[1], w.shape[0], bias=HEAD_B in state)
    with torch.no_grad():
        head.weight.copy_(w)
        if HEAD_B in state:
            head.bias.copy_(state[HEAD_B].float())
    rt = current()
    base = base.to(device=rt.device, dtype=dtype or rt.weight_dtype(False)).eval()
    head = head.to(rt.device).eval()
    return SkyworkPRM(base, head), tok


def prepare_input(tok, problem: str, response: str, step: str = STEP) -> tuple[list[int], list[int]]:
    """(input ids, reward flags) as the official `prepare_input`: bos + problem + "\\n", then every
    step of `response` (split on `step`) followed by the step token, flag 1 at each step token."""
    if tok.bos_token is None:
        raise InputError("PRM tokenizer has no bos token (the Skywork PRM input starts with it)")
    ids = tok.encode(tok.bos_token + problem + "\n")
    flags = [0] * len(ids)
    step_id = tok.encode(step)[-1]
    for s in response.split(step):
        s_ids = (tok.encode(s) if s != "" else []) + [step_id]
        ids += s_ids
        flags += [0] * (len(s_ids) - 1) + [1]
    return ids, flags


def step_rewards(prm, tok, problems: list[str], responses: list[str], chunk: int = 16) -> list[list[float]]:
    """sigmoid(value head) at every step token of each (problem, response), right-padded batches."""
    import torch

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = []
    for i in range(0, len(problems), chunk):
        enc = [prepare_input(tok, p, r) for p, r in zip(problems[i:i + chunk], responses[i:i + chunk])]
        w = max(len(x) for x, _ in enc)
        x = torch.full((len(enc), w), pad, dtype=torch.long)
        m = torch.zeros_like(x)
        for j, (s, _) in enumerate(enc):
            x[j, :len(s)] = torch.tensor(s)
            m[j, :len(s)] = 1
        v = torch.sigmoid(prm(x.to(prm.device), m.to(prm.device))).cpu()
        out += [[float(v[j, k]) for k, f in enumerate(fl) if f] for j, (_, fl) in enumerate(enc)]
    return out


def response_of(text: str) -> str:
    """A (partial) completion as the PRM's response: its trailing newline(s) dropped, since the
    end of the text is a step end already (else the official split adds an empty last step)."""
    return text.rstrip("\n")


def scores(prm, tok, problems: list[str], completions: list[str], chunk: int = 16) -> list[float]:
    """One score per (partial) completion: the reward of its last step (our choice of reduction:
    the step-level beam ranks partials by their newest step, BoN votes with the final one)."""
    return [r[-1] for r in step_rewards(prm, tok, problems, [response_of(c) for c in completions], chunk)]
