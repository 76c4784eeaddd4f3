"""The paper-scale DIBJudge judge (arXiv 2603.10351; architecture as the official code,
github.com/AzureStarz/DIBJudge `dibjudge/modeling.py` and `configs/finetune_deepspeed_4B.yaml`):

- the judge LM (`train.hub.judge`, Qwen3-4B) with LoRA r 16, α 32, dropout 0.05 on q/k/v/o,
  reading [chat turn of the prompt ; response]; its score is a linear head on the final hidden
  state of the last token (the same pairwise Bradley-Terry reward model as the tiny judge, not
  the official "A"/"B" verdict tokens);
- DIBJudge variants: the shared encoder E (`train.hub.encoder`, Qwen3-Embedding-0.6B, frozen)
  encodes the response alone (the same token ids: the two tokenizers must tokenize the responses alike); on its token
  states the same branches as the tiny judge (methods.dibjudge.model): robust branch → VIB / EMA
  VQ / linear (no_bottleneck) → z per token, pooled z_r; bias branch → pooled z_b with the proxy
  heads and the low-level reconstruction of E's first-layer states; z is mapped by a
  zero-initialised linear layer to the judge width and ADDED to the judge's input embeddings at
  the response's token positions (official "z-prompt injection"; a no-op at step 0);
- SFT: the LoRA judge alone; its z_r (for the probe) is the mean of its final states over the
  response tokens.

Training uses the tiny scale's objective and schedule (`run.step_loss`, `run.lr_factor`); the
`train.model` block describes the hub encoder (d_model, n_layers, n_heads, d_ff are checked
against its config) and gives d_z, max_len (judge tokens per sequence; a response keeps at most
half) and the VQ settings.
"""
from __future__ import annotations

import random
from pathlib import Path

import torch
import torch.nn as nn

from methods.core.nn import RMSNorm
from methods.core.results import InputError, read_json, read_jsonl

from .config import RunConfig
from .hub_data import judge_prefix
from .model import NORM_EPS, VIB, EMAVectorQuantizer, SwiGLU, low_level_stats, pool
from .run import lr_factor, step_loss

# official 4B config: LoRA r 16, alpha 32, dropout 0.05 on the attention projections
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
AUX = ("bias", "proxy", "recon")   # the bias-side modules (lr_heads), as the tiny judge


def load_encoder(path: str, cfg: RunConfig):
    """The frozen response encoder (transformers AutoModel: the base model of a Qwen3 embedding
    checkpoint) and its tokenizer; its shape must match the `train.model` block."""
    from transformers import AutoModel, AutoTokenizer

    from methods.core.runtime import current

    rt = current()
    p = Path(path)
    if p.exists() and not (p / "config.json").is_file():
        raise InputError(f"not a model directory (no config.json): {p}")
    kw = {"device_map": str(rt.device)} if rt.is_cuda else {}
    try:
        enc = AutoModel.from_pretrained(str(path), dtype=rt.weight_dtype(False), use_safetensors=True, **kw)
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load encoder {path}: {str(e).splitlines()[0]}") from None
    c = enc.config
    for key, attr in (("d_model", "hidden_size"), ("n_layers", "num_hidden_layers"),
                      ("n_heads", "num_attention_heads"), ("d_ff", "intermediate_size")):
        want, got = getattr(cfg.model, key), getattr(c, attr, None)
        if want != got:
            raise InputError(f"config key 'train.model.{key}' is {want} but the encoder {path} has {attr} {got} "
                             "(at paper scale the model block describes the hub encoder)")
    enc.eval().requires_grad_(False)
    return enc, tok


class HubJudge(nn.Module):
    def __init__(self, judge, tok, encoder, cfg: RunConfig, variant: str, n_bins: dict[str, int]):
        super().__init__()
        from peft import LoraConfig, get_peft_model

        self.cfg, self.variant, self.tok = cfg, variant, tok
        self.dib = variant != "sft"
        judge.requires_grad_(False)
        self.judge = get_peft_model(judge, LoraConfig(bias="none", **LORA))
        base = self.judge.get_base_model()
        # the decoder stack (no LM head), a view into self.judge (not registered twice)
        object.__setattr__(self, "backbone", getattr(base, base.base_model_prefix))
        H = judge.config.hidden_size
        self.score = nn.Linear(H, 1)
        self.encoder = None
        if not self.dib:
            return
        self.encoder = encoder
        d, dz = cfg.model.d_model, cfg.model.d_z
        # the tiny judge's DIBJudge branches (methods.dibjudge.model.Judge), on E's states
        self.robust = nn.Sequential(SwiGLU(d, 2 * d, d), nn.GELU(), SwiGLU(d, 2 * d, d), RMSNorm(d, NORM_EPS, param="w"))
        self.bottleneck = {"dib_vq": "vq", "no_bottleneck": "none"}.get(variant, "vib")
        if self.bottleneck == "vib":
            self.comp = VIB(d, dz)
        elif self.bottleneck == "vq":
            self.pre_vq = nn.Linear(d, dz)
            self.comp = EMAVectorQuantizer(dz, cfg.model.vq_codes, cfg.model.vq_decay, cfg.model.vq_beta)
        else:
            self.comp = nn.Linear(d, dz)
        self.bias = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, 2 * d), nn.GELU(),
                                  nn.Linear(2 * d, dz), RMSNorm(dz, NORM_EPS, param="w"))
        self.proxy = nn.ModuleDict({k: nn.Linear(dz, n) for k, n in n_bins.items()})
        self.recon = nn.Linear(dz, 6)
        self.zproj = nn.Linear(dz, H)          # z-prompt injection, zero-initialised: starts as a no-op
        nn.init.zeros_(self.zproj.weight)
        nn.init.zeros_(self.zproj.bias)

    # ---- inputs
    def encode(self, rows):
        """Judge ids (right-padded) with the response positions, and the response ids alone for
        E, of all A responses then all B responses."""
        from methods.core.runtime import current

        L = self.cfg.model.max_len
        pad = self.tok.pad_token_id
        seqs, spans = [], []
        for k in ("a", "b"):
            for r in rows:
                resp = self.tok(r[k]["text"], add_special_tokens=False)["input_ids"][:L // 2] or [self.tok.eos_token_id]
                pre = judge_prefix(self.tok, r["prompt"])[-(L - len(resp)):]
                seqs.append(pre + resp)
                spans.append((len(pre), len(resp)))
        n, m = max(map(len, seqs)), max(s[1] for s in spans)
        ids = torch.full((len(seqs), n), pad, dtype=torch.long)
        mask = torch.zeros(len(seqs), n, dtype=torch.long)
        pos = torch.zeros(len(seqs), n, dtype=torch.bool)
        eids = torch.full((len(seqs), m), pad, dtype=torch.long)
        emask = torch.zeros(len(seqs), m, dtype=torch.long)
        for i, (s, (st, ln)) in enumerate(zip(seqs, spans)):
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
            pos[i, st:st + ln] = True
            eids[i, :ln] = ids[i, st:st + ln]
            emask[i, :ln] = 1
        return current().to_device({"ids": ids, "mask": mask, "pos": pos, "eids": eids, "emask": emask})

    # ---- forward
    def forward(self, b):
        from methods.core.runtime import current

        rt = current()
        emb = self.backbone.get_input_embeddings()(b["ids"])
        out = {}
        if self.dib:
            with torch.no_grad():
                eo = self.encoder(input_ids=b["eids"], attention_mask=b["emask"], output_hidden_states=True)
            h, h_low = eo.last_hidden_state.float(), eo.hidden_states[1].float()
            mask = b["emask"].bool()
            r = self.robust(h)
            if self.bottleneck == "vib":
                z, comp = self.comp(r)
            elif self.bottleneck == "vq":
                z, comp = self.comp(self.pre_vq(r), mask)
            else:
                z, comp = self.comp(r), torch.zeros(mask.shape, device=h.device)
            zb = pool(self.bias(h), mask)
            inj = torch.zeros(emb.shape, dtype=self.zproj.weight.dtype, device=emb.device)
            inj[b["pos"]] = self.zproj(z)[mask]
            emb = emb + inj.to(emb.dtype)
            out.update(zr=pool(z, mask), zb=zb, comp=(comp * mask).sum(1) / mask.sum(1).clamp_min(1),
                       proxy={k: m(zb) for k, m in self.proxy.items()},
                       recon=self.recon(zb), recon_target=low_level_stats(h_low.detach(), mask))
        with rt.autocast(self.training):
            hs = self.backbone(inputs_embeds=emb, attention_mask=b["mask"]).last_hidden_state
        hs = hs.float()
        last = b["mask"].sum(1) - 1
        out["score"] = self.score(hs[torch.arange(len(hs), device=hs.device), last]).squeeze(-1)
        if not self.dib:
            out["zr"] = pool(hs, b["pos"])
        return out

    @torch.no_grad()
    def score_rows(self, rows, cfg: RunConfig):
        """run.score_rows for the hub judge: per pair the two scores and pooled z_r (z_b), on the CPU."""
        self.eval()
        outs = {"score": [], "zr": [], "zb": []}
        for i in range(0, len(rows), cfg.eval_batch):
            chunk = rows[i:i + cfg.eval_batch]
            o = self(self.encode(chunk))
            n = len(chunk)
            for k in outs:
                if k in o:
                    outs[k].append(torch.stack([o[k][:n], o[k][n:]], 1).float().cpu())
        return {k: torch.cat(v) for k, v in outs.items() if v}

    def trainable_state(self) -> dict:
        """The checkpoint: LoRA weights, heads and branches (not the frozen hub weights)."""
        return {k: v.detach().cpu() for k, v in self.state_dict().items()
                if "lora_" in k or not (k.startswith("judge.") or k.startswith("encoder."))}


def train_hub_variant(cfg: RunConfig, variant: str, data_dir: str, seed: int, log: list):
    """run.train_variant for the hub judge: the same batches (functions of seed and step),
    objective, optimiser groups and schedule. Returns (judge, None)."""
    from methods.core.models import load_model
    from methods.core.runtime import current

    meta = read_json(Path(data_dir) / "meta.json")
    if not meta.get("hub"):
        raise InputError(f"{data_dir} holds synthetic data, but train.hub.judge is set (rerun the data step)")
    if variant != "sft" and not cfg.hub.encoder:
        raise InputError(f"variant {variant} needs train.hub.encoder (the response encoder)")
    train = read_jsonl(Path(data_dir) / "train.jsonl")
    rt = current()
    judge, tok = load_model(cfg.hub.judge, training=True)
    if tok.pad_token_id is None:
        raise InputError(f"the judge tokenizer of {cfg.hub.judge} has no pad token")
    encoder = None
    if variant != "sft":
        encoder, etok = load_encoder(cfg.hub.encoder, cfg)
        probe = [r[k]["text"] for r in train[:32] for k in ("a", "b")]   # the responses E will read
        if etok(probe, add_special_tokens=False)["input_ids"] != tok(probe, add_special_tokens=False)["input_ids"]:
            raise InputError(f"the encoder {cfg.hub.encoder} and judge {cfg.hub.judge} tokenizers differ "
                             "(z-prompt injection needs one tokenization of the response)")
    if rt.is_cuda:
        judge.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch.manual_seed(seed)
    model = HubJudge(judge, tok, encoder, cfg, variant, meta["n_bins"])
    for name, mod in model.named_children():
        if name not in ("judge", "encoder"):
            rt.place(mod, training=True)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    aux = [p for n, p in params if n.split(".")[0] in AUX]
    main = [p for n, p in params if n.split(".")[0] not in AUX]
    opt = torch.optim.AdamW([{"params": main, "lr": cfg.lr}, {"params": aux, "lr": cfg.lr_heads}],
                            weight_decay=cfg.weight_decay)
    base = [g["lr"] for g in opt.param_groups]
    warm = max(1, int(cfg.warmup_frac * cfg.steps))
    ema = {k: None for k in meta["n_bins"]}
    qr = qb = None
    model.train()
    if model.encoder is not None:
        model.encoder.eval()
    for step in range(cfg.steps):
        f = lr_factor(step, warm, cfg.steps)
        for g, b in zip(opt.param_groups, base):
            g["lr"] = b * f
        rng = random.Random(seed * 1_000_003 + step)  # batches are functions of (seed, step)
        rows = [train[rng.randrange(len(train))] for _ in range(cfg.batch_size)]
        out = model(model.encode(rows))
        loss, rec, qr, qb = step_loss(out, rows, step, cfg, variant, model.dib,
                                      getattr(model, "bottleneck", None), meta["n_bins"], ema, qr, qb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_([p for _, p in params], cfg.grad_clip)
        opt.step()
        if step % 50 == 0 or step == cfg.steps - 1:
            rec["loss"] = float(loss.detach())
            log.append({"seed": seed, **rec})
    return model, None
