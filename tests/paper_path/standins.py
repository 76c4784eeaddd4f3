"""Local stand-ins for the hub models and datasets that `config/scales/paper.yaml` names, so that
each paper's paper-scale DAG runs end to end on a CPU with no network.

- Models: tiny random Llama, Qwen2 and Qwen3 architectures saved with `save_pretrained`
  (safetensors), each with a real byte-level BPE tokenizer that follows its family's
  conventions: Llama-3 (bos `<|begin_of_text|>` prepended, eos `<|eot_id|>`/`<|end_of_text|>`,
  no pad, no unk) and Qwen (eos = pad = `<|endoftext|>`, no bos, no unk, ChatML template).
- Datasets: directories laid out like hub dataset repositories (JSONL data files and a README
  whose `configs:` name the subsets and splits), with the real datasets' field names and
  splits, so `datasets.load_dataset(dir, subset, split=...)` (streaming too) reads them exactly
  as it reads the hub.
- Scales: `config/scales/paper.yaml` with every hub id replaced by its stand-in's path, LLM
  endpoints pointed at a local server, and per-paper numbers shrunk: `overlays/common.yaml`
  maps the hub ids, `overlays/<paper>.yaml` holds a paper's numbers (and any ids, datasets or
  lm-eval tasks only it needs). A paper has a stand-in paper path exactly when it has an
  overlay file. A shared part of methods/core with a section of its own (the model pool,
  `overlays/model_pool.yaml`) is shrunk whenever it has an overlay. The result must still
  validate against the scale schema (`methods.core.config.scale_schema`).

    python -m tests.paper_path.standins --out build/standins      # build, then print the
                                                                  # snakemake command to run
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = Path(__file__).with_name("overlays")


def core_overlays() -> list[str]:
    """The shared parts of methods/core with a section of their own (the model pool) that have
    a stand-in overlay: always applied, whichever papers run."""
    from methods.core import registry

    return [c for c in registry.core_parts(ROOT) if (OVERLAYS / f"{c}.yaml").is_file()]


def overlay_papers() -> list[str]:
    """The papers with a stand-in overlay, i.e. whose paper path runs on stand-ins."""
    return sorted(p.stem for p in OVERLAYS.glob("*.yaml") if p.stem != "common" and p.stem not in core_overlays())


def load_overlay() -> dict:
    """The common id maps merged with every paper's (and shared part's) overlay: {models,
    datasets, lm_eval_tasks, papers: {paper or shared part: numbers}}."""
    spec = yaml.safe_load((OVERLAYS / "common.yaml").read_text())
    spec.setdefault("lm_eval_tasks", {})
    spec["papers"] = {}
    for name in overlay_papers() + core_overlays():
        o = yaml.safe_load((OVERLAYS / f"{name}.yaml").read_text())
        unknown = set(o) - {"paper", "models", "datasets", "lm_eval_tasks"}
        if unknown:
            raise KeyError(f"overlays/{name}.yaml: unknown key(s) {sorted(unknown)}")
        for key in ("models", "datasets", "lm_eval_tasks"):
            for k, v in (o.get(key) or {}).items():
                if spec[key].get(k, v) != v:
                    raise KeyError(f"overlays/{name}.yaml maps {k!r} differently from another overlay")
                spec[key][k] = v
        spec["papers"][name] = o.get("paper") or {}
    return spec

QWEN_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3_CHAT = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
               "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
               "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


# ---------------------------------------------------------------------------- text ----
def _sentence(rng: random.Random) -> str:
    from methods.core.data import pcfg_sentence

    return pcfg_sentence(rng).capitalize()


def _problem(rng: random.Random) -> tuple[str, str, str]:
    """(problem, worked solution with a \\boxed answer, answer) of a small arithmetic question."""
    a, b, c = rng.randrange(2, 60), rng.randrange(2, 60), rng.randrange(2, 9)
    ans = (a + b) * c
    problem = f"What is $({a}+{b}) \\times {c}$?"
    solution = f"First ${a}+{b}={a + b}$, then ${a + b} \\times {c} = {ans}$. The answer is $\\boxed{{{ans}}}$."
    return problem, solution, str(ans)


def corpus_text(rng: random.Random, n_sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(n_sentences))


# ----------------------------------------------------------------------- tokenizers ----
def build_tokenizer(family: str, texts: list[str], vocab_size: int = 600):
    """A trained byte-level BPE `PreTrainedTokenizerFast` with `family`'s special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if family == "llama":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|eot_id|>"]
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    if family in DEEPSEEK_FAMILIES:     # DeepSeek-V2: its own bos/eos (a LlamaTokenizerFast on the hub)
        specials = [DEEPSEEK_BOS, DEEPSEEK_EOS]
    if family in VL_FAMILIES:           # Qwen-VL: the vision special tokens of the real vocabulary
        specials += ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if family in DEEPSEEK_FAMILIES:
        # DeepSeek-V2 prepends its bos to every encoding; eos = pad; its "User: / Assistant:" template
        tok.post_processor = processors.TemplateProcessing(
            single=f"{DEEPSEEK_BOS} $A", pair=f"{DEEPSEEK_BOS} $A {DEEPSEEK_BOS} $B",
            special_tokens=[(DEEPSEEK_BOS, tok.token_to_id(DEEPSEEK_BOS))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=DEEPSEEK_BOS, eos_token=DEEPSEEK_EOS,
                                       pad_token=DEEPSEEK_EOS, chat_template=DEEPSEEK_CHAT, model_max_length=163840)
    if family == "llama":
        # Llama-3 prepends <|begin_of_text|> to every encoding (its TemplateProcessing)
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token="<|eot_id|>",
                                       chat_template=LLAMA3_CHAT, model_max_length=131072)
    # Qwen: eos and pad are the same token, no bos, no unk
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   chat_template=QWEN_CHAT, model_max_length=32768)


# --------------------------------------------------------------------------- models ----
# vision-language families: Qwen tokenizer conventions plus the vision special tokens, and the
# real Qwen2-VL image processor (patch 14, merge 2) capped at 112x112 pixels (at most 16 image tokens)
VL_FAMILIES = ("qwen2_5_vl",)
QWEN_VL_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
                "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}"
                "<|vision_start|><|image_pad|><|vision_end|>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
                "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def write_vl_image_processor(out: Path) -> None:
    """The hub's preprocessor_config.json of a Qwen-VL model (Qwen2VLImageProcessor; transformers
    loads its PIL backend where torchvision is absent), with small pixel bounds."""
    from transformers import Qwen2VLImageProcessorPil

    Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=112 * 112, patch_size=14, merge_size=2,
                             temporal_patch_size=2).save_pretrained(out)
    f = out / "preprocessor_config.json"
    cfg = json.loads(f.read_text())
    cfg.update(image_processor_type="Qwen2VLImageProcessor", processor_class="Qwen2_5_VLProcessor")
    f.write_text(json.dumps(cfg, indent=2))


# DeepSeek-V2(-Lite-Chat) tokenizer conventions: bos prepended, eos = pad, "User: ... Assistant: ..." chat
DEEPSEEK_FAMILIES = ("deepseek_v2",)
DEEPSEEK_BOS, DEEPSEEK_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
DEEPSEEK_CHAT = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ 'User: ' + m['content'] + '\n\n' }}"
                 "{% elif m['role'] == 'assistant' %}{{ 'Assistant: ' + m['content'] + eos_token }}"
                 "{% elif m['role'] == 'system' %}{{ m['content'] + '\n\n' }}{% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")
ARCH = {"d": 32, "layers": 2, "heads": 4, "kv_heads": 2, "ff": 64, "max_pos": 8192}


def build_model(family: str, tokenizer, seed: int = 0):
    """A tiny random model of the family's real architecture class."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=ARCH["d"], intermediate_size=ARCH["ff"],
                  num_hidden_layers=ARCH["layers"], num_attention_heads=ARCH["heads"],
                  num_key_value_heads=ARCH["kv_heads"], max_position_embeddings=ARCH["max_pos"],
                  tie_word_embeddings=False)
    if family == "llama":
        eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|eot_id|>")]
        cfg = tf.LlamaConfig(**common, bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
                             rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
        model = tf.LlamaForCausalLM(cfg)
    elif family == "qwen2":
        cfg = tf.Qwen2Config(**common, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        model = tf.Qwen2ForCausalLM(cfg)
    elif family == "qwen3":
        cfg = tf.Qwen3Config(**common, head_dim=ARCH["d"] // ARCH["heads"], eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
        model = tf.Qwen3ForCausalLM(cfg)
    elif family == "qwen2_5_vl":         # Qwen2.5-VL: a 2-block vision tower, M-RoPE text model
        ids = {k: tokenizer.convert_tokens_to_ids(f"<|{k}|>") for k in ("image_pad", "video_pad", "vision_start",
                                                                        "vision_end")}
        cfg = tf.Qwen2_5_VLConfig(
            text_config={**common, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                                                       "mrope_section": [1, 1, 2]},
                         "bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id,
                         "pad_token_id": tokenizer.pad_token_id},
            vision_config=dict(depth=ARCH["layers"], hidden_size=ARCH["d"], intermediate_size=ARCH["ff"],
                               num_heads=ARCH["heads"], out_hidden_size=ARCH["d"], fullatt_block_indexes=[1],
                               window_size=112, patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
            image_token_id=ids["image_pad"], video_token_id=ids["video_pad"],
            vision_start_token_id=ids["vision_start"], vision_end_token_id=ids["vision_end"],
            tie_word_embeddings=False)
        model = tf.Qwen2_5_VLForConditionalGeneration(cfg)
        cfg.eos_token_id, cfg.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    elif family == "deepseek_v2":        # DeepSeek-V2-Lite: MLA (no q LoRA), first layer dense, greedy top-K
        cfg = tf.DeepseekV2Config(
            **{**common, "num_key_value_heads": ARCH["heads"]}, moe_intermediate_size=16, n_routed_experts=4,
            n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1, topk_method="greedy", n_group=1,
            topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0, kv_lora_rank=16, q_lora_rank=None,
            qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        model = tf.DeepseekV2ForCausalLM(cfg)
    elif family == "qwen2_moe":          # Qwen1.5-MoE: every layer sparse, shared expert with its gate
        cfg = tf.Qwen2MoeConfig(**common, moe_intermediate_size=16, shared_expert_intermediate_size=32,
                                num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1,
                                mlp_only_layers=[], eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id)
        model = tf.Qwen2MoeForCausalLM(cfg)
    else:
        raise ValueError(f"unknown stand-in family {family!r}")
    model.generation_config = tf.GenerationConfig(eos_token_id=cfg.eos_token_id,
                                                  pad_token_id=getattr(cfg, "pad_token_id", None))
    return model


# process reward models: a Qwen2 base plus a value head saved under the real checkpoint's names
# (Skywork-o1-Open-PRM: `model.*` of a tied-embedding Qwen2 and `v_head.summary.{weight,bias}`;
# SkyworkAI/skywork-o1-prm-inference), its tokenizer with the bos the PRM input starts with
PRM_FAMILIES = ("qwen2_prm",)


def write_prm_model(out: Path, texts: list[str]) -> None:
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    tok = build_tokenizer("qwen2", texts)
    tok.bos_token = "<|endoftext|>"
    torch.manual_seed(0)
    cfg = tf.Qwen2Config(vocab_size=len(tok), hidden_size=ARCH["d"], intermediate_size=ARCH["ff"],
                         num_hidden_layers=ARCH["layers"], num_attention_heads=ARCH["heads"],
                         num_key_value_heads=ARCH["kv_heads"], max_position_embeddings=ARCH["max_pos"],
                         tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = tf.Qwen2ForCausalLM(cfg)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    state["v_head.summary.weight"] = torch.randn(1, ARCH["d"]) * 0.5
    state["v_head.summary.bias"] = torch.randn(1) * 0.5
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(out)
    tf.GenerationConfig(eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id).save_pretrained(out)
    tok.save_pretrained(out)


def write_model(family: str, out: Path, texts: list[str]) -> None:
    if family in PRM_FAMILIES:
        return write_prm_model(out, texts)
    tok = build_tokenizer(family, texts)
    model = build_model(family, tok)
    if family in VL_FAMILIES:
        tok.chat_template = QWEN_VL_CHAT
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    if family in VL_FAMILIES:
        write_vl_image_processor(out)


# ------------------------------------------------------------------------- datasets ----
RL_MATH_KINDS = ("deepscaler", "aime_h4", "math_lighteval")


def _rl_math_row(kind: str, i: int, p: str, s: str, a: str) -> dict:
    """A row of agentica-org/DeepScaleR-Preview-Dataset (`deepscaler`), HuggingFaceH4/aime_2024
    (`aime_h4`) or DigitalLearningGmbH/MATH-lighteval's default config (`math_lighteval`)."""
    if kind == "deepscaler":
        return {"problem": p, "answer": a, "solution": s}
    if kind == "aime_h4":
        return {"id": 60 + i, "problem": p, "solution": s, "answer": a, "year": "2024",
                "url": f"https://artofproblemsolving.com/wiki/index.php/2024_AIME_I_Problems/Problem_{i + 1}"}
    return {"problem": p, "level": f"Level {1 + i % 5}", "solution": s, "type": "Prealgebra"}


def _rows(kind: str, split: str, n: int, rng: random.Random, subset: str | None = None) -> list[dict]:
    """`n` records of stand-in dataset `kind` (of its config `subset`) in the real dataset's schema."""
    out = []
    for i in range(n):
        p, s, a = _problem(rng)
        if kind == "text":                  # fineweb-edu, dolma, Nemotron-CC: one document per row
            out.append({"text": corpus_text(rng, rng.randrange(3, 12)), "id": f"doc{i}"})
        elif kind == "wikitext":            # Salesforce/wikitext: one line per row, blank lines too
            out.append({"text": "" if i % 7 == 0 else f" {corpus_text(rng, rng.randrange(1, 4))} \n"})
        elif kind == "metamathqa":          # meta-math/MetaMathQA
            out.append({"query": p, "response": s, "type": "GSM_Rephrased", "original_question": p})
        elif kind == "s1k":                 # simplescaling/s1K-1.1
            out.append({"question": p, "solution": s, "cot_type": "math", "source_type": "standin",
                        "metadata": "{}", "gemini_thinking_trajectory": s, "gemini_attempt": s,
                        "deepseek_thinking_trajectory": s, "deepseek_attempt": s})
        elif kind == "math500":             # HuggingFaceH4/MATH-500
            out.append({"problem": p, "solution": s, "answer": a, "subject": "Prealgebra", "level": 1 + i % 5,
                        "unique_id": f"test/prealgebra/{i}.json"})
        elif kind == "hendrycks_math":      # EleutherAI/hendrycks_math (one config per subject)
            out.append({"problem": p, "level": f"Level {1 + i % 5}", "type": "Prealgebra", "solution": s})
        elif kind == "aime_maxwell":        # Maxwell-Jia/AIME_2024
            out.append({"ID": f"2024-I-{i + 1}", "Problem": p, "Solution": s, "Answer": int(a)})
        elif kind == "aime25":              # math-ai/aime25
            out.append({"problem": p, "answer": a, "id": str(i)})
        elif kind == "scope60k":            # Cooolder/SCOPE-60K-final: one record per (question, model)
            out.append(_scope60k_record(split, i, p, a, out))
        elif kind == "openhermes":          # teknium/OpenHermes-2.5 (ShareGPT-style turns; a system turn on some)
            conv = ([{"from": "system", "value": _sentence(rng), "weight": None}] if i % 3 == 0 else []) + [
                {"from": "human", "value": p, "weight": None}, {"from": "gpt", "value": s, "weight": None}]
            if i % 4 == 1:                  # a second exchange
                conv += [{"from": "human", "value": _sentence(rng), "weight": None},
                         {"from": "gpt", "value": corpus_text(rng, 2), "weight": None}]
            out.append({"conversations": conv, "source": "standin", "category": None, "id": None,
                        "model_name": None, "skip_prompt_formatting": False, "system_prompt": None})
        elif kind in RL_MATH_KINDS:         # DeepScaleR, HuggingFaceH4/aime_2024, MATH-lighteval
            out.append(_rl_math_row(kind, i, p, s, a))
        elif kind in INSTRUCT_KINDS:        # gsm8k, OpenMathInstruct-2, Magicoder, ultrafeedback_binarized
            out.append(_instruct_row(kind, i, p, s, a, rng))
        elif kind == "m_preference":        # Unbabel/M-Preference-Collection (Prometheus pairwise rows)
            crit = None if i % 3 else "Is the response helpful and accurate?"   # a third with a rubric
            ra, rb = corpus_text(rng, rng.randrange(1, 4)), corpus_text(rng, rng.randrange(1, 4))
            pref = rng.choice("AB")
            q = _sentence(rng).rstrip(".") + "?"
            out.append({"instruction": f"###Task Description:\nCompare.\n###The instruction to evaluate:\n{q}\n"
                                       f"###Response A to evaluate:\n{ra}\n###Response B to evaluate:\n{rb}\n"
                                       "###Feedback: ",
                        "output": f"{_sentence(rng)} [RESULT] {pref}", "orig_instruction": q,
                        "orig_response_A": ra, "orig_response_B": rb, "orig_criteria": crit,
                        "orig_score_A": str(rng.randrange(1, 6)), "orig_score_B": str(rng.randrange(1, 6)),
                        "orig_preference": pref, "orig_feedback": _sentence(rng), "orig_reference_answer": _sentence(rng)})
        elif kind == "mm_eval":             # prometheus-eval/MM-Eval (one subset; a language column)
            lang = ["en", "ko", "de", "sw", "te", "bn", "aka_Latn"][i % 7]   # xxx_Scrp: Language Resource rows
            out.append({"prompt": _sentence(rng).rstrip(".") + "?", "chosen": corpus_text(rng, 2),
                        "rejected": corpus_text(rng, 2), "language": lang,
                        "subset": "language_resource" if "_" in lang else ["chat", "reasoning", "safety"][i % 3],
                        "chosen_model": "standin-a", "rejected_model": "standin-b", "id": i, "__index_level_0__": i})
        elif kind == "m_rewardbench":       # CohereLabs/m-rewardbench (one subset per language, ISO 639-3_Script)
            out.append({"id": i, "language": subset, "prompt": _sentence(rng).rstrip(".") + "?",
                        "chosen": corpus_text(rng, 2), "rejected": corpus_text(rng, 2),
                        "chosen_model": "standin-a", "rejected_model": "standin-b",
                        "source": "standin", "category": ["Chat", "Safety", "Reasoning"][i % 3]})
        elif kind in _QA_ROWS:              # reasoning benchmarks (amc23, AIME 2025, OlympiadBench, GPQA)
            out.append(_QA_ROWS[kind](i, p, s, a))
        elif kind in IMAGE_DATASETS:        # image benchmarks (PNG bytes in an Image feature)
            out.append(_image_row(kind, split, i, rng))
        else:
            raise ValueError(f"unknown stand-in dataset kind {kind!r}")
    return out


# image benchmarks: written as parquet with a `datasets` Image feature, as on the hub
IMAGE_DATASETS = ("mmbench", "mmstar", "pope")
_COLOURS = {"red": (220, 30, 30), "green": (30, 200, 60), "blue": (40, 60, 220), "yellow": (230, 220, 40)}


def _png_bytes(rng: random.Random, colour: tuple) -> bytes:
    import io

    from PIL import Image

    img = Image.new("RGB", (rng.choice([28, 42, 56]), rng.choice([28, 56])), colour)
    for _ in range(4):   # a few noisy pixels so that images differ
        img.putpixel((rng.randrange(img.width), rng.randrange(img.height)), tuple(rng.randrange(256) for _ in range(3)))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _image_row(kind: str, split: str, i: int, rng: random.Random) -> dict:
    """One record in the real schema of lmms-lab/MMBench (en), Lin-Chen/MMStar or lmms-lab/POPE."""
    names = list(_COLOURS)
    c = rng.randrange(4)
    image = {"bytes": _png_bytes(rng, _COLOURS[names[c]]), "path": None}
    if kind == "pope":
        obj = rng.choice(["dog", "car", "chair", "person"])
        return {"id": str(i), "question_id": str(i), "question": f"Is there a {obj} in the image?",
                "answer": rng.choice(["yes", "no"]), "image_source": f"COCO_val2014_{i:012d}",
                "image": image, "category": ["adversarial", "popular", "random"][i % 3]}
    opts = rng.sample(names, 4)
    ans = "ABCD"[opts.index(names[c])]
    q = "What is the main colour of the image?"
    if kind == "mmstar":
        return {"index": i, "question": q + "\nOptions: " + ", ".join(f"{k}: {v}" for k, v in zip("ABCD", opts)),
                "image": image, "answer": ans, "category": "coarse perception", "l2_category": "image scene and topic",
                "meta_info": {"source": "standin", "split": split, "image_path": f"{i}.png"}}
    three = i % 4 == 3 and ans != "D"          # some MMBench items have three options (D is empty)
    return {"index": i, "question": q, "hint": None if i % 2 else _sentence(rng), "A": opts[0], "B": opts[1],
            "C": opts[2], "D": None if three else opts[3], "answer": ans, "category": "image_scene",
            "image": image, "source": "standin", "l2-category": "coarse_perception", "comment": None, "split": split}


def _write_image_parquet(rows: list[dict], path: Path) -> None:
    import datasets

    feats = datasets.Dataset.from_list(rows).features
    feats["image"] = datasets.Image()
    datasets.Dataset.from_list(rows, features=feats).to_parquet(str(path))


# question/answer benchmarks, one row from (index, problem, worked solution, answer) in the real schema
_QA_ROWS = {
    # math-ai/amc23 (answers stored as floats)
    "amc23": lambda i, p, s, a: {"id": i, "question": p, "answer": float(a), "url": f"https://example.invalid/amc23/{i}"},
    # opencompass/AIME2025 (configs AIME2025-I / AIME2025-II)
    "aime2025_oc": lambda i, p, s, a: {"question": p, "answer": a},
    # Hothan/OlympiadBench (one config per subset; answers in a list)
    "olympiadbench": lambda i, p, s, a: {
        "id": 2000 + i, "question": p, "solution": [s], "final_answer": [f"${a}$"], "context": None,
        "image_1": None, "image_2": None, "image_3": None, "image_4": None, "image_5": None,
        "modality": "Text-only", "difficulty": "Competition", "is_multiple_answer": False, "unit": None,
        "answer_type": "Numerical", "error": None, "question_type": "Open-ended", "subfield": "Algebra",
        "subject": "Math", "language": "English"},
    # Idavidrein/gpqa (configs gpqa_diamond / gpqa_main / ...; one train split)
    "gpqa": lambda i, p, s, a: {
        "Question": p, "Correct Answer": a, "Incorrect Answer 1": str(int(a) + 1),
        "Incorrect Answer 2": str(int(a) + 2), "Incorrect Answer 3": str(int(a) + 3), "Explanation": s,
        "Subdomain": "Arithmetic", "High-level domain": "Physics", "Record ID": f"rec{i:05d}"},
}

# SCOPE-60K's 13 in-distribution models under the short names the official code keys the dataset by
# (github.com/Sullivan07043/SCOPE config/model_pools.py MODEL_NAME_TO_OPENROUTER_ID), each with a
# skill and a verbosity of our own: outcomes follow a per-question difficulty, so routing has signal
SCOPE60K_MODELS = [("deepseek-r1t2-chimera", 0.75, 900), ("nova-2-lite-v1", 0.62, 1400),
                   ("qwen3-235b-a22b", 0.6, 800), ("qwen3-14b", 0.58, 700), ("gpt-oss-20b", 0.6, 500),
                   ("llama-3-3-70b", 0.52, 300), ("gemma-3-27b", 0.5, 350), ("llama-3-1-8b", 0.3, 250),
                   ("gemma-3-12b", 0.42, 300), ("nemotron-nano-9b-v2", 0.45, 900), ("ministral-8b", 0.35, 250),
                   ("gemma-3-4b", 0.3, 280), ("ministral-3b", 0.25, 220)]


def _scope60k_record(split: str, i: int, problem: str, answer: str, previous: list[dict]) -> dict:
    """Record i of a SCOPE-60K stand-in split: question i // 13 (its text is the one of its first
    record) answered by model i % 13; the fields the official scripts read."""
    q, (name, skill, verbosity) = i // len(SCOPE60K_MODELS), SCOPE60K_MODELS[i % len(SCOPE60K_MODELS)]
    if i % len(SCOPE60K_MODELS):
        problem, answer = previous[-1]["prompt"], previous[-1]["gt"]
    r = random.Random(f"scope60k-{split}-{q}")
    difficulty = r.random()
    r = random.Random(f"scope60k-{split}-{q}-{name}")
    correct = r.random() < 1.0 / (1.0 + 2.718281828 ** (-6.0 * (skill - difficulty)))
    return {"id": f"{split}_{q:05d}", "prompt": problem, "model_name": name, "is_correct": correct, "gt": answer,
            "category": ["math", "physics", "general"][q % 3], "usage_prompt_tokens": 20 + len(problem) // 4,
            "usage_completion_tokens": int(verbosity * (0.5 + difficulty) * (0.7 + 0.6 * r.random()))}


INSTRUCT_KINDS = ("gsm8k", "openmathinstruct2", "magicoder", "ultrafeedback_binarized")


def _instruct_row(kind: str, i: int, p: str, s: str, a: str, rng: random.Random) -> dict:
    """One record of an SFT / preference stand-in in the real dataset's fields."""
    if kind == "gsm8k":                     # openai/gsm8k (configs main / socratic)
        return {"question": p, "answer": f"{s}\n#### {a}"}
    if kind == "openmathinstruct2":         # nvidia/OpenMathInstruct-2
        return {"problem": p, "generated_solution": s, "expected_answer": a, "problem_source": "augmented_math"}
    if kind == "magicoder":                 # ise-uiuc/Magicoder-OSS-Instruct-75K
        return {"lang": "python", "raw_index": i, "index": i, "seed": f"def f{i}(x):",
                "openai_fingerprint": "fp_standin", "problem": f"Write a function that returns {a}.",
                "solution": f"```python\ndef answer():\n    return {a}\n```"}
    # HuggingFaceH4/ultrafeedback_binarized: chat-format lists, the same fields in every split
    chosen = [{"content": p, "role": "user"}, {"content": s, "role": "assistant"}]
    rejected = [{"content": p, "role": "user"}, {"content": _sentence(rng), "role": "assistant"}]
    return {"prompt": p, "prompt_id": f"{i:064x}", "chosen": chosen, "rejected": rejected, "messages": chosen,
            "score_chosen": 8.0, "score_rejected": 4.0}


# kind → {subset: {split: n_rows}}; None = the default (unnamed) config
DATASET_LAYOUTS = {
    "m_preference": {None: {"train": 40}},
    "mm_eval": {None: {"test": 42}},
    # m-rewardbench: 2 low-resource (by the dibjudge paper config), 2 other languages, the translation subset
    "m_rewardbench": {s: {"test": 10} for s in ("arb_Arab", "ell_Grek", "kor_Hang", "ukr_Cyrl", "translation")},
    "text": {None: {"train": 400}},
    "wikitext": {"wikitext-2-raw-v1": {"train": 600, "validation": 120, "test": 200},
                 "wikitext-103-raw-v1": {"train": 600, "validation": 120, "test": 200}},
    "metamathqa": {None: {"train": 300}},
    "s1k": {None: {"train": 120}},
    "math500": {None: {"test": 60}},
    "hendrycks_math": {s: {"train": 40, "test": 20} for s in (
        "algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory",
        "prealgebra", "precalculus")},
    "aime_maxwell": {None: {"train": 30}},
    "aime25": {None: {"test": 30}},
    "mmbench": {"en": {"dev": 24}},
    "mmstar": {None: {"val": 24}},
    "pope": {None: {"test": 24}},
    "scope60k": {None: {"train": 8 * 13, "anchor": 24 * 13, "test": 10 * 13}},   # questions x 13 models
    "openhermes": {None: {"train": 60}},
    "deepscaler": {None: {"train": 60}},
    "aime_h4": {None: {"train": 30}},
    "math_lighteval": {"default": {"train": 40, "test": 20}},
    "gsm8k": {"main": {"train": 60, "test": 20}, "socratic": {"train": 20, "test": 10}},
    "openmathinstruct2": {None: {"train": 40, "train_1M": 60, "train_2M": 20, "train_5M": 20}},
    "magicoder": {None: {"train": 60}},
    "ultrafeedback_binarized": {None: {s: 40 for s in ("train_prefs", "train_sft", "test_prefs", "test_sft",
                                                        "train_gen", "test_gen")}},
    "amc23": {None: {"test": 8}},
    "aime2025_oc": {"AIME2025-I": {"test": 6}, "AIME2025-II": {"test": 6}},
    "olympiadbench": {s: {"train": 8} for s in ("OE_TO_maths_en_COMP", "OE_TO_physics_en_COMP")},
    "gpqa": {s: {"train": 8} for s in ("gpqa_diamond", "gpqa_main")},
}


def write_dataset(kind: str, out: Path, seed: int = 0) -> None:
    """A hub-layout dataset directory: `<subset>/<split>.jsonl` and a README `configs:` block."""
    rng = random.Random(f"{kind}-{seed}")
    configs = []
    for subset, splits in DATASET_LAYOUTS[kind].items():
        sub = subset or "default"
        files = []
        for split, n in splits.items():
            if kind in IMAGE_DATASETS:      # parquet with an Image feature, as the hub's image datasets
                path = out / sub / f"{split}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_image_parquet(_rows(kind, split, n, rng, subset), path)
                files.append({"split": split, "path": f"{sub}/{split}.parquet"})
                continue
            path = out / sub / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in _rows(kind, split, n, rng, subset)))
            files.append({"split": split, "path": f"{sub}/{split}.jsonl"})
        configs.append({"config_name": sub, "data_files": files})
    header = yaml.safe_dump({"configs": configs}, sort_keys=False)
    (out / "README.md").write_text(f"---\n{header}---\nStand-in for a hub dataset ({kind}); generated by "
                                   "tests/paper_path/standins.py.\n")


# ------------------------------------------------------------- single-file datasets ----
# Datasets released as one file outside the hub (e.g. LoCoMo's locomo10.json in the
# snap-research/locomo GitHub repository): the config names a local path, and the overlay maps
# that path to the stand-in file itself. kind → file name.
DATASET_FILES = {"locomo": "locomo10.json"}

_LOCOMO_NAMES = ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]


def _locomo(rng: random.Random, n_conv: int = 2, n_sessions: int = 3, n_turns: int = 4, n_qa: int = 6) -> list[dict]:
    """locomo10.json: a list of samples {"sample_id", "conversation": {"speaker_a", "speaker_b",
    "session_<n>_date_time" ("1:56 pm on 8 May, 2023"), "session_<n>": [{"speaker", "dia_id"
    ("D<n>:<t>"), "text"} (+ "img_url", "blip_caption", "query" on image turns)]}, "qa": [{"question",
    "answer" (a string or a number), "evidence": [dia_ids], "category" 1-4}, category 5 with
    "adversarial_answer" instead of "answer"], "event_summary", "observation", "session_summary"}."""
    out = []
    for c in range(n_conv):
        a, b = _LOCOMO_NAMES[2 * c % len(_LOCOMO_NAMES)], _LOCOMO_NAMES[(2 * c + 1) % len(_LOCOMO_NAMES)]
        conv, turn_ids = {"speaker_a": a, "speaker_b": b}, []
        events, obs, summ = {}, {}, {}
        for s in range(1, n_sessions + 1):
            h, m = rng.randrange(1, 13), rng.randrange(60)
            conv[f"session_{s}_date_time"] = (f"{h}:{m:02d} {rng.choice(['am', 'pm'])} on {rng.randrange(1, 29)} "
                                              f"{_MONTHS[(4 + s) % 12]}, 2023")
            turns = []
            for t in range(1, n_turns + 1):
                turn = {"speaker": a if t % 2 else b, "dia_id": f"D{s}:{t}", "text": _sentence(rng)}
                if t == 3:      # an image-sharing turn, as in LoCoMo
                    turn.update(img_url=[f"https://example.invalid/{c}-{s}-{t}.jpg"],
                                blip_caption=f"a photo of {_sentence(rng).lower().rstrip('.')}", query="photo")
                turns.append(turn)
                turn_ids.append(turn["dia_id"])
            conv[f"session_{s}"] = turns
            events[f"events_session_{s}"] = {a: [_sentence(rng)], b: [], "date": conv[f"session_{s}_date_time"]}
            obs[f"session_{s}_observation"] = {a: [[_sentence(rng), f"D{s}:1"]], b: [[_sentence(rng), f"D{s}:2"]]}
            summ[f"session_{s}_summary"] = corpus_text(rng, 2)
        qa = []
        for i in range(n_qa):
            cat = 1 + i % 5
            ev = rng.sample(turn_ids, 2 if cat == 1 else 1)
            q = {"question": _sentence(rng).rstrip(".") + "?", "evidence": ev, "category": cat}
            if cat == 5:
                q["adversarial_answer"] = _sentence(rng)
            else:
                q["answer"] = rng.randrange(2000, 2024) if cat == 2 and i % 2 else _sentence(rng)
            qa.append(q)
        out.append({"qa": qa, "conversation": conv, "event_summary": events, "observation": obs,
                    "session_summary": summ, "sample_id": f"conv-{26 + c}"})
    return out


def write_dataset_file(kind: str, out: Path, seed: int = 0) -> None:
    """The single-file stand-in of `kind` (DATASET_FILES) at `out`."""
    rng = random.Random(f"{kind}-{seed}")
    if kind == "locomo":
        data = _locomo(rng)
    else:
        raise ValueError(f"unknown stand-in dataset file kind {kind!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))


# ------------------------------------------------------------------------ the scales ----
def _merge(base, over):
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            if k not in base:
                raise KeyError(f"overlay key {k!r} is not in paper.yaml")
            out[k] = _merge(base[k], v)
        return out
    return over


def _replace_ids(node, mapping: dict[str, str], base_url: str | None):
    if isinstance(node, dict):
        out = {k: _replace_ids(v, mapping, base_url) for k, v in node.items()}
        if base_url and "base_url" in out and "serve" not in out:  # a `serve:` spec: the DAG's own server
            out["base_url"] = base_url
        return out
    if isinstance(node, list):
        return [_replace_ids(v, mapping, base_url) for v in node]
    if isinstance(node, str) and node in mapping:
        return mapping[node]
    return node


def build(out: Path, papers: list[str] | None = None, base_url: str | None = None) -> Path:
    """Write the stand-ins under `out` and `out/scales/{smoke,tiny,paper}.yaml`; return the scales dir.
    `papers` limits the overlay's paper sections that are shrunk (all by default)."""
    spec = load_overlay()
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    texts = [corpus_text(rng, 8) for _ in range(300)] + ["".join(_problem(rng)) for _ in range(300)]
    mapping = {}
    for family in sorted(set(spec["models"].values())):
        d = out / "models" / family
        if not (d / "config.json").exists():
            write_model(family, d, texts)
    for hub_id, family in spec["models"].items():
        mapping[hub_id] = str(out / "models" / family)
    for hub_id, kind in spec["datasets"].items():
        d = out / "datasets" / kind
        if kind in DATASET_FILES:         # one file (not a hub repo): the path maps to the file
            f = d / DATASET_FILES[kind]
            if not f.exists():
                write_dataset_file(kind, f)
            mapping[hub_id] = str(f)
            continue
        if not (d / "README.md").exists():
            write_dataset(kind, d)
        mapping[hub_id] = str(d)
    tasks_dir = out / "lm_eval_tasks"
    write_lm_eval_tasks(tasks_dir, spec["lm_eval_tasks"])
    paper = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())
    over = {k: v for k, v in spec["papers"].items() if papers is None or k in papers or k in core_overlays()}
    paper = _replace_ids(_merge(paper, over), mapping, base_url)
    scales = out / "scales"
    scales.mkdir(exist_ok=True)
    for s in ("smoke", "tiny"):
        shutil.copy(ROOT / "config" / "scales" / f"{s}.yaml", scales / f"{s}.yaml")
    (scales / "paper.yaml").write_text(
        "# Generated by tests/paper_path/standins.py: config/scales/paper.yaml with hub ids mapped to\n"
        "# local stand-ins and the numbers of tests/paper_path/overlay.yaml\n" + yaml.safe_dump(paper, sort_keys=False))
    return scales


# ----------------------------------------------------------------------- lm-eval tasks ----
def write_lm_eval_tasks(out: Path, tasks: dict[str, dict]) -> None:
    """Local lm-eval tasks that carry the real tasks' names and output types (they take
    precedence over the registered ones through $ICML26_LM_EVAL_TASKS), each on a small JSONL
    of generated items; `tasks` maps name → {output_type, tag (optional), n, context (optional:
    sentences of filler context before each generate_until question, for long-context suites such
    as LongBench), synthetic (optional: `ruler_niah`, items generated at load time from the task
    metadata as lm-eval's RULER tasks do, see RULER_NIAH_PY)}."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for name, t in tasks.items():
        rows = []
        for i in range(t.get("n", 8)):
            p, s, a = _problem(rng)
            rows.append({"question": p, "answer": a, "choices": [a, str(int(a) + 1), str(int(a) + 2)],
                         "label": 0, "text": corpus_text(rng, 3)})
        if t.get("context"):  # its own generator: the shared stream (every other task's items) is unchanged
            crng = random.Random(f"{name}-context")
            for r in rows:
                r["context"] = corpus_text(crng, t["context"])
        data = out / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
               "test_split": "test", "output_type": t["output_type"], "metadata": {"version": 1.0}}
        if t.get("tag"):
            cfg["tag"] = t["tag"]
        kind = t["output_type"]
        if kind == "multiple_choice":
            cfg.update(doc_to_text="{{question}}", doc_to_choice="{{choices}}", doc_to_target="{{label}}",
                       metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
        elif kind == "generate_until":
            cfg.update(doc_to_text="Q: {{question}}\nA:", doc_to_target=" {{answer}}",
                       generation_kwargs={"until": ["\n"], "max_gen_toks": 8, "do_sample": False},
                       metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}])
            if t.get("context"):
                cfg["doc_to_text"] = "{{context}}\n\n" + cfg["doc_to_text"]
        elif kind == "loglikelihood":
            cfg.update(doc_to_text="{{question}} =", doc_to_target=" {{answer}}",
                       metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}])
        elif kind == "loglikelihood_rolling":
            # as lm-eval's wikitext: the metrics' registered aggregations (weighted_perplexity,
            # bits_per_byte); "word_perplexity" etc. are metrics, not aggregation names
            cfg.update(doc_to_text="", doc_to_target="{{text}}",
                       metric_list=[{"metric": m} for m in ("word_perplexity", "byte_perplexity", "bits_per_byte")])
        else:
            raise ValueError(f"stand-in task {name}: unknown output_type {kind!r}")
        function = None
        if t.get("synthetic") == "ruler_niah":
            if kind != "generate_until":
                raise ValueError(f"stand-in task {name}: RULER tasks are generate_until")
            (out / "standin_ruler.py").write_text(RULER_NIAH_PY)
            data.unlink()
            cfg.update(dataset_path="", dataset_kwargs={"n_per_length": t.get("n", 8), "seed": name},
                       doc_to_text="{{input}}", doc_to_target="{{outputs[0]}}", target_delimiter=" ")
            function = "standin_ruler.niah"
        elif t.get("synthetic"):
            raise ValueError(f"stand-in task {name}: unknown synthetic kind {t['synthetic']!r}")
        text = yaml.safe_dump(cfg, sort_keys=False)
        if function:  # lm-eval's YAML tag for a function in a module beside the YAML file
            text += f"custom_dataset: !function {function}\n"
        (out / f"{name}.yaml").write_text(text)


RULER_NIAH_PY = '''"""Generated by tests/paper_path/standins.py: a stand-in for lm-eval's RULER niah tasks.
As the real ones (lm_eval/tasks/ruler/niah_utils.py), the items are generated when the task loads,
one set per `max_seq_lengths` entry of the task metadata (lm-eval passes the TaskManager's metadata
to `custom_dataset`), each prompt filled with haystack to that many tokens (less the generation)
with the tokenizer the metadata names (`tokenizer`, `pretrained` or `model`). Stricter than the
real tasks: `max_seq_lengths` must be set (the real ones fall back to 4096)."""
import random

import datasets

HAYSTACK = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
TEMPLATE = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
            "I will quiz you about the numbers afterwards.\\n{context}\\nWhat is the special magic number "
            "for {key} mentioned in the provided text?")
GEN_TOKENS = 8


def niah(n_per_length=8, seed="niah", **metadata):
    lengths = metadata.get("max_seq_lengths")
    if not lengths:
        raise ValueError("stand-in RULER task: the task metadata has no max_seq_lengths")
    name = next((metadata[k] for k in ("tokenizer", "pretrained", "model")
                 if isinstance(metadata.get(k), str) and metadata[k]), None)
    if name is None:
        raise ValueError("stand-in RULER task: no tokenizer in the task metadata (RULER sizes its prompts "
                         "with it; pass tokenizer=<name or path>)")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    rng = random.Random(str(seed))
    rows = []
    for seq in lengths:
        for i in range(n_per_length):
            key, value = f"item-{rng.randrange(1000)}", str(rng.randrange(10 ** 6, 10 ** 7))
            depth = rng.random()

            def prompt(n):
                cut = round(depth * n)
                context = HAYSTACK * cut + f"One of the special magic numbers for {key} is: {value}. " \\
                    + HAYSTACK * (n - cut)
                return TEMPLATE.format(context=context, key=key)

            def fits(n):
                return len(tok(prompt(n))["input_ids"]) + GEN_TOKENS <= seq

            if not fits(0):
                raise ValueError(f"stand-in RULER task: max_seq_length {seq} is shorter than the template")
            hi = 1
            while fits(hi):
                hi *= 2
            lo = hi // 2                      # fits(lo), not fits(hi): the largest fitting haystack
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            text = prompt(lo)
            rows.append({"index": i, "input": text, "outputs": [value], "length": len(tok(text)["input_ids"]),
                         "max_length": seq})
    return {"test": datasets.Dataset.from_list(rows)}
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/standins")
    ap.add_argument("--base-url", default=None, help="URL of the OpenAI-compatible server for LLM endpoints")
    a = ap.parse_args(argv)
    scales = build(Path(a.out).resolve(), base_url=a.base_url)
    print(f"ICML26_LM_EVAL_TASKS={Path(a.out).resolve() / 'lm_eval_tasks'} snakemake --cores all "
          f"--config scale=paper scales_dir={scales} results_dir={Path(a.out).resolve() / 'results'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
