"""Paper scale: decision-level PID of hub multimodal LLMs on hub benchmarks (arXiv 2606.00959).

The same procedure as the tiny fusion model (`run.py`), on real MLLMs loaded through transformers'
image-text auto classes:

- items (`load_benchmark`): each benchmark's split through `datasets`, normalised to (user text, the
  part of it that is the item's text modality, candidate answers, label, image PNG bytes); the
  prompts follow lmms-eval's tasks of the same names (`mmbench_en_dev`, `mmstar`, `pope`);
- decisions (`VLModel.probs`): p(y | ...) = softmax over the next-token logits of the candidates'
  first tokens after the chat template's assistant prefix ("softmax over option scores");
- calibrated embedding masking (the paper's intervention): to get p(y | x_v) the text span's token
  embeddings are replaced by draws from N(mu_t, diag sigma_t^2), the per-dimension statistics of
  those embeddings over the profiling items; for p(y | x_t) the image features the language model
  receives (the vision tower's merged output) are replaced by draws from N(mu_v, diag sigma_v^2);
  lengths and positions are kept (Fusion.forward's masking, on a real model);
- BATCH features: the mean-pooled image features and mean-pooled text-span embeddings;
- PID-guided reweighting: LoRA (peft) on the last 20% of the language model's layers, loss the
  weighted SFT loss of the answer token.

Processors: `AutoProcessor` where it loads; transformers' Qwen-VL processors also need a video
processor that requires torchvision, which this project does not install, so for models with a
Qwen-VL image processor (`image_grid_thw`, `merge_size`) the inputs are built from
`AutoImageProcessor` + `AutoTokenizer` exactly as Qwen2_5_VLProcessor does (the image placeholder
expanded to grid_t*grid_h*grid_w / merge_size^2 tokens). Other models need AutoProcessor.
"""
from __future__ import annotations

import inspect
import io

import numpy as np

from methods.core.results import InputError

# lmms-eval's prompt suffixes of these tasks (lmms_eval/tasks/{mmbench,mmstar,pope})
MC_POST = "Answer with the option's letter from the given choices directly."
POPE_POST = "Answer the question using a single word or phrase."
FORMATS = ("mmbench_en_dev", "mmstar", "pope")
LETTERS = ("A", "B", "C", "D")
LORA_RANK = 8          # the paper's rank is not known to us (ours); alpha = 2 x rank
REQUIRED = {"mmbench_en_dev": ("question", "hint", "A", "B", "answer", "image"),
            "mmstar": ("question", "answer", "image"), "pope": ("question", "answer", "image")}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and v.strip().lower() in ("", "nan"))


def _png(img, where: str) -> bytes:
    """An image field (PIL image, {"bytes", "path"} dict, raw bytes or a path) as PNG bytes."""
    from PIL import Image, UnidentifiedImageError

    try:
        if isinstance(img, dict):
            img = img.get("bytes") or img.get("path")
        if isinstance(img, (bytes, bytearray)):
            img = Image.open(io.BytesIO(img))
        elif isinstance(img, str):
            img = Image.open(img)
        if not isinstance(img, Image.Image):
            raise InputError(f"{where}: the image field is not an image ({type(img).__name__})")
        buf = io.BytesIO()
        img.convert("RGB").save(buf, format="PNG")
        return buf.getvalue()
    except (UnidentifiedImageError, OSError) as e:
        raise InputError(f"{where}: the image cannot be decoded ({str(e).splitlines()[0]})") from None


def normalise(name: str, rec: dict, where: str) -> dict:
    """One record of benchmark `name` → {text (the masked span), post (the fixed instruction),
    cands, y, png}."""
    miss = [k for k in REQUIRED[name] if k not in rec]
    if miss:
        raise InputError(f"{where}: no field {miss[0]!r} (a {name} record has {', '.join(REQUIRED[name])})")
    if name == "pope":
        ans = str(rec["answer"]).strip().lower()
        if ans not in ("yes", "no"):
            raise InputError(f"{where}: answer {rec['answer']!r} is not yes/no")
        return {"text": f"{rec['question']}\n", "post": POPE_POST, "cands": ["Yes", "No"], "y": int(ans == "no"),
                "png": _png(rec["image"], where)}
    if name == "mmbench_en_dev":
        opts = [(k, str(rec[k])) for k in LETTERS if k in rec and not _missing(rec[k])]
        body = ("" if _missing(rec["hint"]) else f"{rec['hint']}\n") + f"{rec['question']}\n"
        body += "".join(f"{k}. {v}\n" for k, v in opts)
        cands = [k for k, _ in opts]
    else:   # mmstar: the options are written in the question ("Options: A: ..., B: ...")
        body, cands = f"{rec['question']}\n", list(LETTERS)
    ans = str(rec["answer"]).strip()
    if ans not in cands:
        raise InputError(f"{where}: answer {rec['answer']!r} is not one of the options {cands}")
    return {"text": body, "post": MC_POST, "cands": cands, "y": cands.index(ans), "png": _png(rec["image"], where)}


def load_benchmark(spec, n_profile: int, n_train: int, n_test: int, seed: int) -> dict:
    """The benchmark's split through `datasets`, shuffled with `seed` and cut into profile (masking
    statistics), train (the reweighting pool) and test (at most n_test) items."""
    import datasets

    from methods.core.data import dataset_splits

    if spec.name not in FORMATS:
        raise InputError(f"benchmark {spec.name!r}: no prompt format (known: {', '.join(FORMATS)})")
    splits = dataset_splits(spec.dataset, spec.subset)
    if spec.split not in splits:
        raise InputError(f"benchmark {spec.name!r}: dataset {spec.dataset} has no split {spec.split!r} (has {splits})")
    try:
        ds = datasets.load_dataset(spec.dataset, spec.subset, split=spec.split)
    except Exception as e:  # the hub client raises many types; one line is what the user needs
        raise InputError(f"cannot load dataset {spec.dataset!r} split {spec.split!r}: {str(e).splitlines()[0]}") from None
    if n_profile + n_train + 1 > len(ds):
        raise InputError(f"benchmark {spec.name!r}: {len(ds)} items, fewer than n_profile + n_train + 1 = "
                         f"{n_profile + n_train + 1}")
    order = np.random.default_rng(seed).permutation(len(ds))
    cuts = {"profile": order[:n_profile], "train": order[n_profile:n_profile + n_train],
            "test": order[n_profile + n_train:n_profile + n_train + n_test]}
    return {part: [normalise(spec.name, ds[int(i)], f"{spec.dataset} ({spec.split}) item {int(i)}") for i in idx]
            for part, idx in cuts.items()}


def pack(items: list[dict]) -> dict:
    """Items as plain arrays (npz without pickles): texts, candidates padded with "", labels, and
    the PNG bytes concatenated with offsets."""
    k = max(len(it["cands"]) for it in items)
    blobs = [np.frombuffer(it["png"], np.uint8) for it in items]
    return {"text": np.array([it["text"] for it in items]), "post": np.array([it["post"] for it in items]),
            "cands": np.array([it["cands"] + [""] * (k - len(it["cands"])) for it in items]),
            "y": np.array([it["y"] for it in items], np.int64),
            "png": np.concatenate(blobs), "png_off": np.cumsum([0] + [len(b) for b in blobs])}


def unpack(d: dict) -> list[dict]:
    off = d["png_off"]
    return [{"text": str(d["text"][i]), "post": str(d["post"][i]), "cands": [str(c) for c in d["cands"][i] if c],
             "y": int(d["y"][i]), "png": d["png"][off[i]:off[i + 1]].tobytes()} for i in range(len(d["y"]))]


class VLModel:
    """A hub MLLM (AutoModelForImageTextToText) with calibrated masking of its text span or image."""

    def __init__(self, path: str):
        import transformers as tf

        from methods.core.runtime import current

        self.rt = current()
        import torch

        # one GPU, or spread over all visible GPUs (the 72B models need several)
        kw = ({"device_map": "auto" if torch.cuda.device_count() > 1 else str(self.rt.device)}
              if self.rt.is_cuda else {})
        try:
            self.model = tf.AutoModelForImageTextToText.from_pretrained(
                str(path), dtype=self.rt.weight_dtype(False), use_safetensors=True, **kw)
            self.tok = tf.AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError) as e:
            raise InputError(f"cannot load multimodal model {path}: {str(e).splitlines()[0]}") from None
        if not self.rt.is_cuda:
            self.model.to(self.rt.device)
        self.model.eval()
        self.path = str(path)
        try:
            self.proc = tf.AutoProcessor.from_pretrained(str(path))
            self.improc = None
        except (ImportError, AttributeError, OSError, ValueError, TypeError):
            self.proc = None
            try:
                self.improc = tf.AutoImageProcessor.from_pretrained(str(path))
            except (OSError, ValueError) as e:
                raise InputError(f"{path}: no image processor ({str(e).splitlines()[0]})") from None
            if not hasattr(self.improc, "merge_size"):
                raise InputError(f"{path}: AutoProcessor cannot be loaded here and its image processor "
                                 f"({type(self.improc).__name__}) is not a Qwen-VL one")
        self.image_token_id = getattr(self.model.config, "image_token_id", None)
        if self.image_token_id is None or not hasattr(self.model, "get_image_features"):
            raise InputError(f"{path}: not an image-text model with image placeholder tokens "
                             f"({type(self.model).__name__})")
        if not getattr(self.tok, "chat_template", None):
            raise InputError(f"{path}: the tokenizer has no chat template")
        self._img_params = set(inspect.signature(self.model.get_image_features).parameters)

    # ---- inputs
    def encode(self, item: dict) -> dict:
        """input_ids [1, L], the text span's positions, and the image processor's tensors."""
        import torch
        from PIL import Image

        img = Image.open(io.BytesIO(item["png"])).convert("RGB")
        marker = "\x00TEXT\x00"
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": marker}]}]
        full = self.tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        if full.count(marker) != 1:
            raise InputError(f"{self.path}: the chat template does not place the user text once")
        pre, suf = full.split(marker)
        if self.proc is not None:
            enc = self.proc(text=[pre], images=[img], return_tensors="pt")
            pre_ids = enc.pop("input_ids")[0].tolist()
            enc.pop("attention_mask", None)
        else:
            enc = dict(self.improc(images=[img], return_tensors="pt"))
            n = int(enc["image_grid_thw"].prod()) // self.improc.merge_size ** 2
            tok = self.tok.convert_ids_to_tokens(self.image_token_id)
            if pre.count(tok) != 1:
                raise InputError(f"{self.path}: the chat template's image placeholder {tok!r} is not in the prompt once")
            pre_ids = self.tok(pre.replace(tok, tok * n), add_special_tokens=False)["input_ids"]
        span = self.tok(item["text"], add_special_tokens=False)["input_ids"]
        post = self.tok(item["post"] + suf, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([pre_ids + span + post])
        return {"input_ids": ids, "span": slice(len(pre_ids), len(pre_ids) + len(span)),
                "image": {k: v for k, v in enc.items() if k in self._img_params}}

    def cand_ids(self, cands: list[str]) -> list[int]:
        ids = [self.tok(c, add_special_tokens=False)["input_ids"][0] for c in cands]
        if len(set(ids)) != len(ids):
            raise InputError(f"{self.path}: the candidates {cands} do not have distinct first tokens")
        return ids

    def parts(self, enc: dict):
        """(text embeddings [1, L, d], the image features output) of one encoded item."""
        import torch

        ids = self.rt.to_device(enc["input_ids"])
        with torch.no_grad():
            emb = self.model.get_input_embeddings()(ids)
            img = self.model.get_image_features(**self.rt.to_device(enc["image"]), return_dict=True)
        return emb, img

    @staticmethod
    def image_feats(img):
        import torch

        po = img.pooler_output
        return torch.cat(list(po), 0) if isinstance(po, (list, tuple)) else po.reshape(-1, po.shape[-1])

    def logits(self, enc: dict, emb, img, mask: str | None = None, stats=None, seed: int = 0, grad: bool = False):
        """Next-token logits [V] after the prompt, the text span ("txt") or the image ("img")
        replaced by calibrated Gaussian draws."""
        import torch
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        gen = torch.Generator(device="cpu").manual_seed(seed)
        feats = self.image_feats(img)
        if mask == "txt":
            mu, sd = stats["txt"]
            emb = emb.clone()
            n = enc["span"].stop - enc["span"].start
            noise = torch.randn((n, emb.shape[-1]), generator=gen).to(emb.device, emb.dtype)
            emb[0, enc["span"]] = mu.to(emb.device, emb.dtype) + sd.to(emb.device, emb.dtype) * noise
        elif mask == "img":
            mu, sd = stats["img"]
            noise = torch.randn(feats.shape, generator=gen).to(feats.device, feats.dtype)
            feats = mu.to(feats.device, feats.dtype) + sd.to(feats.device, feats.dtype) * noise
        out = BaseModelOutputWithPooling(last_hidden_state=None, pooler_output=(feats,))
        rest = {k: v for k, v in self.rt.to_device(enc["image"]).items() if k not in ("pixel_values",)}
        ids = self.rt.to_device(enc["input_ids"])
        with torch.set_grad_enabled(grad):
            o = self.model(input_ids=ids, inputs_embeds=emb, mm_encoder_outputs={"image": out}, **rest)
        return o.logits[0, -1].float()


def profile_stats(vm: VLModel, items: list[dict]) -> dict:
    """Per-dimension (mu, sigma) of the text-span embeddings and of the image features over the
    profiling items (emb_stats of the tiny model)."""
    import torch

    txt, img = [], []
    for it in items:
        enc = vm.encode(it)
        emb, im = vm.parts(enc)
        txt.append(emb[0, enc["span"]].float().cpu())
        img.append(vm.image_feats(im).float().cpu())
    t, v = torch.cat(txt), torch.cat(img)
    if len(t) < 2 or len(v) < 2:
        raise InputError("profile: too few text or image tokens for the masking statistics")
    return {"txt": (t.mean(0), t.std(0)), "img": (v.mean(0), v.std(0))}


def decisions(vm: VLModel, stats: dict, items: list[dict], seed: int) -> dict:
    """p_full = p(y|v,t), p_1 = p(y|v) (text masked), p_2 = p(y|t) (image masked), the BATCH
    features f_1 (mean image feature), f_2 (mean text-span embedding), and y. Items with fewer
    candidates than the widest are padded with probability 0 (never the argmax)."""
    import torch

    k = max(len(it["cands"]) for it in items)
    out = {key: np.zeros((len(items), k), np.float32) for key in ("p_full", "p_1", "p_2")}
    f1, f2 = [], []
    for i, it in enumerate(items):
        enc = vm.encode(it)
        cid = vm.cand_ids(it["cands"])
        emb, img = vm.parts(enc)
        for key, mask, s in (("p_full", None, 0), ("p_1", "txt", 1), ("p_2", "img", 2)):
            lg = vm.logits(enc, emb, img, mask, stats, seed=seed + 3 * i + s)
            out[key][i, :len(cid)] = torch.softmax(lg[cid], -1).cpu().numpy()
        f1.append(vm.image_feats(img).float().mean(0).cpu().numpy())
        f2.append(emb[0, enc["span"]].float().mean(0).cpu().numpy())
    return {**out, "f_1": np.stack(f1), "f_2": np.stack(f2), "y": np.array([it["y"] for it in items])}


def lora_finetune(path: str, items: list[dict], w: np.ndarray, rc, seed: int):
    """Weighted SFT (the answer token's cross-entropy, weight w_i per item) of LoRA adapters on
    the attention projections of the last 20% of the language model's layers (peft)."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    vm = VLModel(path)
    n_layers = vm.model.config.get_text_config().num_hidden_layers
    last = list(range(n_layers - max(1, round(0.2 * n_layers)), n_layers))
    cfg = LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0, layers_to_transform=last,
                     layers_pattern="layers", target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    base = vm.model
    vm.model = get_peft_model(base, cfg)
    params = [p for p in vm.model.parameters() if p.requires_grad]
    if not params:
        raise InputError(f"{path}: LoRA found no q/k/v/o projections in the last {len(last)} layers")
    opt = torch.optim.Adam(params, lr=rc.lr)
    rng = np.random.default_rng(seed)
    encs = [vm.encode(it) for it in items]
    targets = [vm.cand_ids(it["cands"])[it["y"]] for it in items]
    vm.model.train()
    for _ in range(rc.steps):
        idx = rng.choice(len(items), size=rc.batch_size)
        opt.zero_grad()
        wsum = float(w[idx].sum())
        for i in idx:
            emb, img = vm.parts(encs[i])
            lg = vm.logits(encs[i], emb, img, grad=True)
            loss = torch.nn.functional.cross_entropy(lg[None], torch.tensor([targets[i]], device=lg.device))
            (loss * float(w[i]) / wsum).backward()
        opt.step()
    vm.model.eval()
    return vm


def accuracy(vm: VLModel, items: list[dict]) -> float:
    import torch

    hit = 0
    for it in items:
        enc = vm.encode(it)
        emb, img = vm.parts(enc)
        with torch.no_grad():
            lg = vm.logits(enc, emb, img)
        hit += int(int(lg[vm.cand_ids(it["cands"])].argmax()) == it["y"])
    return hit / len(items)
