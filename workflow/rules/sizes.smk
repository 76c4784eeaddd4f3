# GPU job sizes per paper: <name>_job(wc) → the R.Job (methods/core/resources.py) of one torch
# step at a GPU scale, from its configured model and the workload of the scale's section (steps x
# batch x seq for training, items x tokens for evaluation; R.PROMPT_TOKENS / R.SEQ_TOKENS where the
# config gives no length), or None where the job needs no GPU (a pointer to a hub id, an HTTP
# client). Rules use them through `sized` and `runtime_of` (common.smk); included after it.
def own_or_hub(hub_id, model, vocab=R.CHAR_VOCAB):
    """A step's model: the hub model where the config names one, else its own `model:` shape."""
    return hub_spec(hub_id) if hub_id else R.spec_from_config(model, vocab)


def train_tokens(train, seq):
    return train["steps"] * train["batch_size"] * seq


def sn_spec(scale):
    return R.spec_from_config(sn(scale, "run", "model"), sn(scale, "steptime", "vocab_size"))


def sn_train_job(wc):
    run = sn(wc.scale, "run")
    t = run["train"]
    return R.train_job(sn_spec(wc.scale), tokens=train_tokens(t, run["seq_len"]), seq=run["seq_len"],
                       batch=t["batch_size"], optimizer=t["optimizer"], parallel=True,
                       replicated=ddp_replicas(wc.scale), label="sn_train")


def sn_steptime_job(wc):
    c, st = sn_steptime_cfg(wc.scale), sn(wc.scale, "steptime")
    steps = len(c["schemes"]) * (st["warmup"] + st["rounds"])
    return R.train_job(sn_spec(wc.scale), tokens=steps * c["batch_size"] * c["seq_len"], seq=c["seq_len"],
                       batch=c["batch_size"], label="sn_steptime")


def sn_evaluate_job(wc):
    e, spec = sn(wc.scale, "eval"), sn_spec(wc.scale)
    works = [w for _ in sn_runs(wc.scale)
             for w in R.lm_eval_works(spec, e["tasks"], batch=e["batch_size"], limit=e["limit"], max_gen=e["max_gen_toks"])]
    return R.infer_job(works, label="sn_evaluate")


def wdp_spec(scale):
    return R.spec_from_config(wdp(scale, "pretrain", "model"), wdp(scale, "tokenizer", "vocab_size"))


def wdp_pretrain_job(wc):
    pre = wdp(wc.scale, "pretrain")
    t = pre["train"]
    return R.train_job(wdp_spec(wc.scale), tokens=train_tokens(t, pre["seq_len"]), seq=pre["seq_len"],
                       batch=t["batch_size"], optimizer=t["optimizer"], parallel=True,
                       replicated=ddp_replicas(wc.scale), label="wdp_pretrain")


def wdp_finetune_job(wc):
    ft, seq = wdp(wc.scale, "finetune"), wdp(wc.scale, "pretrain", "seq_len")
    t = ft["train"]  # one run per LR of the grid, in this job
    return R.train_job(wdp_spec(wc.scale), tokens=len(ft["lrs"]) * train_tokens(t, seq), seq=seq,
                       batch=t["batch_size"], optimizer=t["optimizer"], label="wdp_finetune")


def wdp_evaluate_job(wc):
    """The base and one fine-tuned model per task, each on every task's test split: a
    loglikelihood and a generation request per item."""
    e, tasks = wdp(wc.scale, "eval"), wdp(wc.scale, "world", "tasks")
    items = sum(min(t["n_test"], e["limit"] or t["n_test"]) for t in tasks.values())
    w = R.Infer(wdp_spec(wc.scale), seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_gen_toks"], batch=e["batch_size"])
    ll = R.Infer(wdp_spec(wc.scale), seqs=items, prompt=R.PROMPT_TOKENS, batch=e["batch_size"])
    return R.infer_job([w, ll] * (1 + len(tasks)), label="wdp_evaluate")


def wdp_probes_job(wc):
    p, seq = wdp(wc.scale, "probes"), wdp(wc.scale, "pretrain", "seq_len")
    seqs = p["loss_batches"] * p["batch_size"] + p["n_val_sequences"]
    return R.infer_job([R.Infer(wdp_spec(wc.scale), seqs=seqs, prompt=seq, batch=p["batch_size"])], label="wdp_probes")


def dm_spec(scale, arch):
    a, tok = dm(scale, "archs", arch), dm(scale, "data", "tokenizer")
    vocab = HUB_MODELS[tok]["vocab"] if tok in HUB_MODELS else R.CHAR_VOCAB
    return R.spec_from_config(dm(scale, "lm", "model"), vocab, n_experts=a["n_experts"], k=a["k"], expert_d_ff=a["d_ff"])


def dm_train_job(wc):
    t, seq = dm(wc.scale, "lm", "train"), dm(wc.scale, "data", "seq_len")
    return R.train_job(dm_spec(wc.scale, wc.arch), tokens=train_tokens(t, seq), seq=seq, batch=t["batch_size"],
                       optimizer=t["optimizer"], parallel=True, replicated=ddp_replicas(wc.scale), label="dm_train")


def dm_compose_job(wc):
    c = dm(wc.scale, "compose")
    spec = R.spec_from_config(c["model"], R.CHAR_VOCAB, n_experts=c["n_experts"], k=c["k"], expert_d_ff=c["d_ff"])
    seq = c["model"]["max_seq_len"]
    return R.train_job(spec, tokens=len(c["seeds"]) * train_tokens(c["train"], seq), seq=seq,
                       batch=c["train"]["batch_size"], label="dm_compose")


def dm_timing_job(wc):
    tm, seq = dm(wc.scale, "timing"), dm(wc.scale, "data", "seq_len")
    specs = [dm_spec(wc.scale, a) for a in dm_archs(wc.scale)]
    big = max(specs, key=R.param_count)
    tokens = len(specs) * (tm["warmup"] + tm["reps"]) * tm["batch_size"] * seq
    return R.train_job(big, tokens=tokens, seq=seq, batch=tm["batch_size"], label="dm_timing")


def dm_lm_eval_job(wc):
    d = dm(wc.scale, "downstream")
    works = R.lm_eval_works(dm_spec(wc.scale, wc.arch), d["eval_tasks"], batch=dm(wc.scale, "lm", "eval_batch_size"))
    return R.infer_job(works, label="dm_lm_eval")


def lq_spec(scale):
    b = lq(scale, "base")
    return own_or_hub(b["hub_id"], b["model"])


def lfq_train_fp_job(wc):
    """Paper scale: the hub model loaded, checked on a few validation windows, saved."""
    b = lq(wc.scale, "base")
    return R.infer_job([R.Infer(lq_spec(wc.scale), seqs=b["val_batches"], prompt=b["seq_len"])], label="lfq_train_fp")


def lfq_ptq_job(scale, method, final_only, label):
    """Block-wise PTQ over the calibration windows: the bf16 model, the fp32 inputs and outputs
    of the block at work for every window, and (OmniQuant, LFQ) AdamW on one block's parameters
    for `epochs` passes; LFQ re-trains only the final block through the LM head."""
    s, c, q = lq_spec(scale), lq(scale, "calib"), lq(scale, "quant")
    tokens, block = c["n_samples"] * c["seq_len"], R.layer_params(s)
    io = 2 * tokens * s.d_model * 4
    forward = R.forward_flops(s, tokens, c["seq_len"] / 2)
    if final_only:
        trained = 2 * (block + s.vocab * s.d_model) * tokens * 3 * q["epochs"]
    else:
        trained = {"omni": 3 * q["epochs"], "gptq": 1, "rtn": 0}[method] * forward
    seconds = R.compute_seconds(forward + trained, "train")
    return R.size(sharded=R.weight_bytes(s) + io + R.TRAIN_BYTES["adamw"] * block, seconds=seconds,
                  load=R.weight_bytes(s), host=2 * R.weight_bytes(s), label=label)


def lfq_quantize_job(wc):
    return lfq_ptq_job(wc.scale, wc.method, False, "lfq_quantize")


def lfq_final_job(wc):
    return lfq_ptq_job(wc.scale, wc.method, True, "lfq_final")


def lfq_evaluate_job(wc):
    """The FP model and every variant of one setting: perplexity and KL windows, greedy EM on
    the running-sum prompts, and the lm-eval tasks."""
    e, s = lq(wc.scale, "eval"), lq_spec(wc.scale)
    per_model = [R.Infer(s, seqs=e["n_ppl_seqs"] + e["n_kl_seqs"], prompt=e["seq_len"], batch=e["batch_size"]),
                 R.Infer(s, seqs=lq(wc.scale, "data", "n_eval") * len(e["buckets"]), prompt=R.PROMPT_TOKENS,
                         gen=4 * max(e["buckets"]), batch=e["batch_size"])]
    per_model += R.lm_eval_works(s, e["lm_eval_tasks"], batch=e["batch_size"], limit=e["lm_eval_limit"])
    return R.infer_job(per_model * (1 + len(lq(wc.scale, "variants"))), label="lfq_evaluate")


def ag_spec(scale):
    run, tok = ag(scale, "run"), ag(scale, "data", "tokenizer")
    vocab = HUB_MODELS[tok]["vocab"] if tok in HUB_MODELS else R.CHAR_VOCAB
    return hub_spec(run["hub_id"]) if run["hub_id"] else R.spec_from_config(run["model"], vocab)


def agoq_train_job(wc):
    """world_size DDP ranks, one GPU each (mp.start_processes on one host): every rank holds the
    whole model, its AdamW state, the flat fp32 gradient and its all-reduced mean, and the
    activations of batch / world_size sequences."""
    run = ag(wc.scale, "run")
    t, world, s = run["train"], run["world_size"], ag_spec(wc.scale)
    return R.train_job(s, tokens=train_tokens(t, run["seq_len"]), seq=run["seq_len"], batch=t["batch_size"],
                       optimizer=t["optimizer"], gpus=world, micro=t["batch_size"] // world, replicated=True,
                       parallel=True, extra_per_gpu=2 * 4 * R.param_count(s), label="agoq_train")


def agoq_probe_job(wc):
    """W simulated workers in one process: gradients of micro-batches (no optimizer) and the
    W flat fp32 gradients of the collective."""
    p, s = ag(wc.scale, "probe"), ag_spec(wc.scale)
    tokens = p["n_batches"] * sum(p["workers"]) * p["micro_batch"] * p["seq_len"]
    return R.train_job(s, tokens=tokens, seq=p["seq_len"], batch=p["micro_batch"], optimizer="none",
                       extra_bytes=4 * R.param_count(s) * max(p["workers"]), label="agoq_probe")


RQ_TOKENS_PER_WORD = 2.5  # the passkey prompts' random words: ~16k words ≈ 40k Llama tokens (paper.yaml)


def rq_spec(scale):
    b = rq(scale, "base")
    return own_or_hub(b["hub_id"], b["model"])


def rq_prompt(scale, key):
    return int(rq(scale, "data", key) * RQ_TOKENS_PER_WORD)


def rabitqcache_train_job(wc):
    b = rq(wc.scale, "base")
    return R.infer_job([R.Infer(rq_spec(wc.scale), seqs=b["val_texts"], prompt=rq_prompt(wc.scale, "train_len"))],
                       label="rabitqcache_train")


def rabitqcache_capture_job(wc):
    c = rq(wc.scale, "capture")
    return R.infer_job([R.Infer(rq_spec(wc.scale), seqs=c["n_prompts"], prompt=rq_prompt(wc.scale, "eval_len"),
                                gen=c["n_steps"], batch=c["batch_size"])], label="rabitqcache_capture")


def rabitqcache_sparse_job(wc):
    """Per batch one dense prefill (and the no-centre ablation's own), then tail_steps decode
    steps for every selector (dense, RaBitQ and INT4 at each p, top-k / Quest / random at its budgets)."""
    sp = rq(wc.scale, "sparse")
    selectors = 1 + 4 * len(sp["top_ps"])
    s, n = rq_spec(wc.scale), rq_prompt(wc.scale, "eval_len")
    return R.infer_job([R.Infer(s, seqs=2 * sp["n_prompts"], prompt=n, batch=sp["batch_size"]),
                        R.Infer(s, seqs=sp["n_prompts"] * selectors, prompt=0, gen=sp["tail_steps"], batch=sp["batch_size"])],
                       label="rabitqcache_sparse")


def rabitqcache_lm_eval_job(wc):
    lm = rq(wc.scale, "lm_eval")
    works = R.lm_eval_works(rq_spec(wc.scale), lm["tasks"], batch=lm["batch_size"], limit=lm["limit"],
                            seq_lengths=lm["metadata"].get("max_seq_lengths"))
    return R.infer_job(works, label="rabitqcache_lm_eval")


def asag_decode_job(wc):
    """Greedy decoding of every test problem up to the token budget, one at a time (the policy's
    signals are read at every step)."""
    d, hub = asag(wc.scale, "decode"), asag(wc.scale, "train", "hub_id")
    if not hub:
        spec = R.spec_from_config(asag(wc.scale, "train", "model"), R.CHAR_VOCAB)
    else:
        spec = hub_spec(hub)
    n = d["n_problems"] or asag(wc.scale, "data", "n_test")
    return R.infer_job([R.Infer(spec, seqs=n, prompt=R.PROMPT_TOKENS, gen=d["budget"], batch=1)], label="asag_decode")


def asag_train_job(wc):
    """Paper scale: records the hub LRM (nothing trained, no GPU); else the tiny model."""
    tr = asag(wc.scale, "train")
    if tr["hub_id"]:
        return None
    return R.train_job(R.spec_from_config(tr["model"], R.CHAR_VOCAB), tokens=train_tokens(tr["train"], tr["seq_len"]),
                       seq=tr["seq_len"], batch=tr["train"]["batch_size"], label="asag_train")


def rm_spec(scale):
    p = rm(scale, "pretrain")
    if p["hub_id"]:
        return hub_spec(p["hub_id"])
    m = p["moe"]
    return R.spec_from_config(p["model"], R.CHAR_VOCAB, n_experts=m["n_experts"], k=m["k"],
                              expert_d_ff=m["expert_d_ff"], n_shared=m["n_shared"])


def remoe_pretrain_job(wc):
    p = rm(wc.scale, "pretrain")
    if p["hub_id"]:  # paper scale: the hub checkpoint is loaded, not pre-trained
        return R.load_job(rm_spec(wc.scale), label="remoe_pretrain")
    return R.train_job(rm_spec(wc.scale), tokens=train_tokens(p["train"], p["model"]["max_seq_len"]),
                       seq=p["model"]["max_seq_len"], batch=p["train"]["batch_size"], label="remoe_pretrain")


def remoe_finetune_job(wc):
    """Gate-only: the routers train (AdamW), everything else is frozen; micro-batch
    batch / grad_accum sequences of hub.seq_len."""
    s, t, h = rm_spec(wc.scale), rm(wc.scale, "finetune", "train"), rm(wc.scale, "hub")
    routers = s.n_layers * s.n_experts * s.d_model
    return R.train_job(s, tokens=train_tokens(t, h["seq_len"]), seq=h["seq_len"], batch=t["batch_size"],
                       trainable=routers / R.param_count(s), micro=max(1, t["batch_size"] // max(1, h["grad_accum"])),
                       label="remoe_finetune")


def remoe_trace_job(wc):
    tr, seq = rm(wc.scale, "trace"), rm(wc.scale, "hub", "seq_len")
    return R.infer_job([R.Infer(rm_spec(wc.scale), seqs=len(rm_ckpts(wc.scale)) * tr["n_docs"], prompt=seq,
                                batch=tr["batch_size"])], label="remoe_trace")


def edlm_spec(scale):
    a = edlm(scale, "ar")
    return own_or_hub(a["hub_id"], a["model"])


def edlm_train_ar_job(wc):
    a = edlm(wc.scale, "ar")
    if a["hub_id"]:  # paper scale: the hub base, saved as is
        return R.load_job(edlm_spec(wc.scale), label="edlm_train_ar")
    return R.train_job(edlm_spec(wc.scale), tokens=train_tokens(a["train"], a["seq_len"]), seq=a["seq_len"],
                       batch=a["train"]["batch_size"], label="edlm_train_ar")


def edlm_convert_job(wc):
    c = edlm(wc.scale, "convert")
    return R.train_job(edlm_spec(wc.scale), tokens=train_tokens(c["train"], c["seq_len"]), seq=c["seq_len"],
                       batch=c["train"]["batch_size"], optimizer=c["train"]["optimizer"], label="edlm_convert")


def edlm_eval_job(wc):
    """AR greedy decoding, then every variant at every threshold decoding block by block: each
    step recomputes its block (upper bound: one token accepted per step)."""
    e, s = edlm(wc.scale, "eval"), edlm_spec(wc.scale)
    items = e["n_per_task"] * len(edlm(wc.scale, "data", "tasks"))
    ar = R.Infer(s, seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_new"], batch=e["batch_size"])
    dlm = R.Infer(s, seqs=items, prompt=R.PROMPT_TOKENS, gen=e["max_new"], batch=e["batch_size"], block=e["block"])
    return R.infer_job([ar] + [dlm] * (len(edlm(wc.scale, "variants")) * len(e["thresholds"])), label="edlm_eval")


RS_OPTIMIZER = {"adamw": "adamw", "adam_nomom": "adam", "adam_noadapt": "adam", "sgd": "sgd", "sgd_mom": "sgd_momentum"}


def rs_spec(scale, width):
    """The hub base of a width (hub.models by hidden size), else the warm-start architecture."""
    for m in rs(scale, "hub", "models"):
        try:
            spec = hub_spec(m)
        except KeyError:
            continue
        if spec.d_model == int(width):
            return spec
    a = rs(scale, "warmstart", "arch")
    model = {"d_model": int(width), "n_layers": a["n_layers"], "n_heads": a["n_heads"], "n_kv_heads": None,
             "d_ff": int(int(width) * a["ff_mult"]), "max_seq_len": a["max_seq_len"], "tie_embeddings": True}
    return R.spec_from_config(model, R.CHAR_VOCAB)


def rs_warmstart_job(wc):
    w = rs(wc.scale, "warmstart")
    steps = w["steps"][sorted(rs(wc.scale, "widths")).index(int(wc.rs_w))]
    s = rs_spec(wc.scale, wc.rs_w)
    if not steps:  # the hub checkpoint is the base: loaded, rounded to bf16, saved
        return R.load_job(s, label="rs_warmstart")
    seq = w["arch"]["max_seq_len"]
    return R.train_job(s, tokens=steps * w["batch_size"] * seq, seq=seq, batch=w["batch_size"], label="rs_warmstart")


def rs_grpo_job(wc):
    """steps x n_prompts x group_size rollouts of up to max_new tokens (generated in this
    process), one old-policy scoring pass and one training pass over them."""
    g, s = rs(wc.scale, "grpo"), rs_spec(wc.scale, wc.rs_w)
    seqs, seq = g["steps"] * g["n_prompts"] * g["group_size"], R.PROMPT_TOKENS + g["max_new"]
    batch = min(g["n_prompts"] * g["group_size"], R.DECODE_BATCH)
    also = (R.Infer(s, seqs=seqs, prompt=R.PROMPT_TOKENS, gen=g["max_new"], batch=batch, shared=True),
            R.Infer(s, seqs=seqs, prompt=seq, batch=1, shared=True))
    ref = R.weight_bytes(s) if g["beta"] else 0.0
    return R.train_job(s, tokens=seqs * seq, seq=seq, batch=g["n_prompts"] * g["group_size"],
                       optimizer=RS_OPTIMIZER[wc.rs_opt], also=also, extra_bytes=ref, label="rs_grpo")


def rs_sft_job(wc):
    sf = rs(wc.scale, "sft")
    s = rs_spec(wc.scale, max(rs(wc.scale, "widths")))
    return R.train_job(s, tokens=len(sf["lrs"]) * sf["steps"] * sf["batch_size"] * R.PROMPT_TOKENS, seq=R.PROMPT_TOKENS,
                       batch=sf["batch_size"], label="rs_sft")


def pid_lora_job(scale, model_id, tokens, batch, label):
    s = hub_spec(model_id)
    return R.train_job(s, tokens=tokens, seq=R.VL_ITEM_TOKENS, batch=batch,
                       trainable=R.lora_params(s) / R.param_count(s), label=label)


def pid_train_job(wc):
    """Paper scale (the step itself is not implemented yet): a LoRA fine-tune of the VL base
    (the omni model for `omni`) under one mixture weighting."""
    h, t = pid(wc.scale, "hub"), pid(wc.scale, "train")
    model = h["omni_models"][0] if wc.pid_mix == "omni" else h["lora_base"]
    if not model:
        return R.train_job(R.ModelSpec(t["hidden"], 1, 1, 1, t["hidden"], R.CHAR_VOCAB), tokens=t["steps"] * t["batch_size"],
                           seq=1, batch=t["batch_size"], label="pid_train")
    return pid_lora_job(wc.scale, model, t["steps"] * t["batch_size"] * R.VL_ITEM_TOKENS, t["batch_size"], "pid_train")


def pid_decide_job(wc):
    """Every VL and omni model's decisions on every benchmark's test items under three maskings
    (both modalities, vision only, text only), one model at a time."""
    h, n = pid(wc.scale, "hub"), pid(wc.scale, "data", "n_test")
    works = [R.Infer(hub_spec(m), seqs=3 * n * len(h["benchmarks"]), prompt=R.VL_ITEM_TOKENS, gen=1, batch=8)
             for m in h["vl_models"]]
    works += [R.Infer(hub_spec(m), seqs=3 * n * len(h["omni_benchmarks"]), prompt=R.VL_ITEM_TOKENS, gen=1, batch=8)
              for m in h["omni_models"]]
    return R.infer_job(works, label="pid_decide")


def pid_reweight_job(wc):
    h, r = pid(wc.scale, "hub"), pid(wc.scale, "reweight")
    tokens = 3 * len(r["seeds"]) * r["steps"] * r["batch_size"] * R.VL_ITEM_TOKENS  # uniform, random, PID weights
    return pid_lora_job(wc.scale, h["lora_base"], tokens, r["batch_size"], "pid_reweight")


def dj_train_job(wc):
    """Paper scale: the judge with LoRA r16, and (DIB variants) the bottleneck encoder
    trained in full, on pairs of up to max_len tokens, once per seed."""
    t = dj(wc.scale, "train")
    judge, seq = hub_spec(t["hub"]["judge"]), t["model"]["max_len"]
    tokens = len(t["seeds"]) * t["steps"] * t["batch_size"] * seq
    enc_bytes = enc_s = 0.0
    if wc.variant != "sft":
        enc = hub_spec(t["hub"]["encoder"])
        enc_bytes = R.train_state_bytes(enc) + R.activation_bytes(enc, 1, seq)
        enc_s = R.compute_seconds(R.train_flops(enc, tokens, seq), "train")
    return R.train_job(judge, tokens=tokens, seq=seq, batch=t["batch_size"], trainable=R.lora_params(judge) / R.param_count(judge),
                       extra_bytes=enc_bytes, extra_seconds=enc_s, label="dj_train")


def vs_spec(scale):
    return R.spec_from_config(vs(scale, "pretrain", "model"), R.CHAR_VOCAB)


def vs_pretrain_job(wc):
    p = vs(wc.scale, "pretrain")
    seq = p["model"]["max_seq_len"]
    return R.train_job(vs_spec(wc.scale), tokens=train_tokens(p["train"], seq), seq=seq,
                       batch=p["train"]["batch_size"], label="vs_pretrain")


def vs_dpo_job(wc):
    d, seq = vs(wc.scale, "dpo"), vs(wc.scale, "pretrain", "model", "max_seq_len")
    s = vs_spec(wc.scale)  # chosen + rejected through the policy, and the frozen reference
    return R.train_job(s, tokens=2 * train_tokens(d["train"], seq), seq=seq, batch=2 * d["train"]["batch_size"],
                       extra_bytes=R.weight_bytes(s), label="vs_dpo")


def vs_sample_job(wc):
    """An HTTP client of the generator endpoint where the config names one (no GPU), else the
    tiny model sampling every method."""
    sm = vs(wc.scale, "sample")
    gen = (sm.get("generators") or {}).get(wc.vsmodel) if "generators" in sm else sm.get("generator")
    if (gen or {}).get("backend"):
        return None
    n = sm["n"] * len(sm["methods"]) * vs(wc.scale, "world", "n_topics")
    return R.infer_job([R.Infer(vs_spec(wc.scale), seqs=n, prompt=R.PROMPT_TOKENS, gen=sm["max_new_tokens"],
                                batch=R.DECODE_BATCH)], label="vs_sample")


def us_member(scale, name):
    return next(m for m in us(scale, "pool", "members") if m["name"] == name)


def pool_tiny_train(m, label):
    """A member or verifier trained here (smoke/tiny configs): its own model and train sections."""
    seq = m["model"]["max_seq_len"]
    return R.train_job(R.spec_from_config(m["model"], R.CHAR_VOCAB), tokens=train_tokens(m["train"], seq), seq=seq,
                       batch=m["train"]["batch_size"], label=label)


def pool_train_member_job(wc):
    m = us_member(wc.scale, wc.member)
    return None if m["hub"] else pool_tiny_train(m, "pool_train_member")  # a hub member: a pointer


def pool_train_verifier_job(wc):
    v = us(wc.scale, "pool", "verifier")
    return None if v["hub"] else pool_tiny_train(v, "pool_train_verifier")


def pool_specs(scale):
    """The policy members' and the verifier's specs (hub models; own shapes where trained here)."""
    p = us(scale, "pool")
    mk = lambda m: hub_spec(m["hub"]) if m["hub"] else R.spec_from_config(m["model"], R.CHAR_VOCAB)
    return [mk(m) for m in p["members"]], mk(p["verifier"])


def pool_costs_job(wc):
    """Every member and the verifier loaded in turn; forwards of batch x ctx_len, repeated."""
    c = us(wc.scale, "pool", "cost")
    members, verifier = pool_specs(wc.scale)
    works = [R.Infer(s, seqs=c["batch"] * c["repeats"], prompt=c["ctx_len"], gen=1, batch=c["batch"])
             for s in members + [verifier]]
    return R.infer_job(works, label="pool_costs")


def us_build_table_job(wc):
    """Per member: greedy, max(bon) shared best-of-N samples and the verifier-guided beam
    (beam_bs x beam_cp candidates) on every query, up to max_new_tokens each; the verifier,
    resident beside each member, scores every sample."""
    t = us(wc.scale, "table")
    members, verifier = pool_specs(wc.scale)
    samples = t["n_queries"] * (1 + max(t["bon"] or [0]) + t["beam_cp"] * t["beam_bs"])
    batch = min(max(t["bon"] or [1]), R.DECODE_BATCH)
    works = [R.Infer(s, seqs=samples, prompt=R.PROMPT_TOKENS, gen=t["max_new_tokens"], batch=batch) for s in members]
    works += [R.Infer(verifier, seqs=samples * len(members), prompt=R.PROMPT_TOKENS + t["max_new_tokens"], batch=batch)]
    return R.infer_job(works, extra_bytes=R.weight_bytes(verifier), label="us_build_table")


def fr_train_expert_job(wc):
    h, e = fr(wc.scale, "hub"), fr(wc.scale, "expert")
    if h["experts"].get(wc.domain):  # a hub expert: a pointer
        return None
    seq = e["model"]["max_seq_len"]
    return R.train_job(R.spec_from_config(e["model"], R.CHAR_VOCAB), tokens=train_tokens(e["train"], seq), seq=seq,
                       batch=e["train"]["batch_size"], label="fr_train_expert")


def fr_models(scale):
    """(router spec, [expert specs]): the hub models at paper scale, else the tiny shapes."""
    h = fr(scale, "hub")
    if h["router_base"]:
        return hub_spec(h["router_base"]), [hub_spec(h["experts"][d]) for d in ("add", "rev", "brk")]
    tiny = lambda sec: R.spec_from_config(fr(scale, sec, "model"), R.CHAR_VOCAB)
    return tiny("router"), [tiny("expert")] * 3


def fr_seq(scale):
    return R.SEQ_TOKENS if fr(scale, "hub", "router_base") else fr(scale, "router", "model", "max_seq_len")


def fr_sft_router_job(wc):
    """Router SFT (all weights) with the three experts' forwards on the same sequences (the
    routing targets on disagreement tokens)."""
    router, experts = fr_models(wc.scale)
    t, seq = fr(wc.scale, "router", "train"), fr_seq(wc.scale)
    n = t["steps"] * t["batch_size"]
    also = tuple(R.Infer(e, seqs=n, prompt=seq, batch=1) for e in experts)
    return R.train_job(router, tokens=n * seq, seq=seq, batch=t["batch_size"], also=also, label="fr_sft_router")


def fr_cdpo_job(wc):
    """Preference pairs from the SFT FusionRoute (router + experts decoding together), then DPO of
    the router (chosen + rejected) against its frozen SFT copy."""
    router, experts = fr_models(wc.scale)
    c, ev, seq = fr(wc.scale, "cdpo"), fr(wc.scale, "eval"), fr_seq(wc.scale)
    gen = [R.Infer(m, seqs=c["n_prefs"], prompt=R.PROMPT_TOKENS, gen=ev["max_new_tokens"], batch=1, shared=m is router)
           for m in [router] + experts]
    n = c["train"]["steps"] * c["train"]["batch_size"]
    also = tuple(gen) + (R.Infer(router, seqs=2 * n, prompt=seq, batch=1),)
    return R.train_job(router, tokens=2 * n * seq, seq=seq, batch=2 * c["train"]["batch_size"], also=also,
                       label="fr_cdpo")


def fr_eval_job(wc):
    """Every system on the evaluation tasks (paper: hub.lm_eval_tasks): the three experts alone
    and the two FusionRoute routers, each decoding with all four models resident."""
    router, experts = fr_models(wc.scale)
    ev, tasks = fr(wc.scale, "eval"), fr(wc.scale, "hub", "lm_eval_tasks")
    if fr(wc.scale, "hub", "router_base"):
        run = lambda s: R.lm_eval_works(s, tasks, batch=ev["batch_size"])
    else:
        n = fr(wc.scale, "data", "n_test") * 4
        run = lambda s: [R.Infer(s, seqs=n, prompt=fr_seq(wc.scale), gen=ev["max_new_tokens"], batch=ev["batch_size"])]
    works = [w for e in experts for w in run(e)] + [w for _ in range(2) for m in [router] + experts for w in run(m)]
    resident = sum(R.weight_bytes(m) for m in [router] + experts) - max(R.weight_bytes(m) for m in [router] + experts)
    return R.infer_job(works, extra_bytes=resident, label="fr_eval")


def sc_predictor(scale):
    p = sc(scale, "predictor")
    return own_or_hub(p["hub"], p["model"])


def sc_member_job(wc):
    m = next(m for m in sc(wc.scale, "extra_members") if m["name"] == wc.xm)
    return None if m["hub"] else pool_tiny_train(m, "sc_member")  # a hub / API member: a pointer


def sc_outcomes_job(wc):
    """Every pool model's outcome on every query. With hub / API members (paper scale: the
    OpenRouter pool, outcomes from the SCOPE-60K data) nothing runs on a GPU; tiny members
    generate here."""
    q, pool = sc(wc.scale, "outcomes", "queries"), sc(wc.scale, "outcomes", "pool")
    own = {m["name"]: m for m in sc(wc.scale, "extra_members")}
    shared = {m["name"]: m for m in us(wc.scale, "pool", "members")}
    members = [own.get(n) or shared[n] for n in pool["members"]]
    local = [m for m in members if not m["hub"]]
    if not local:
        return None
    n = q["n_anchor"] + q["n_train"] + q["n_test"]
    works = [R.Infer(R.spec_from_config(m["model"], R.CHAR_VOCAB), seqs=n, prompt=R.PROMPT_TOKENS,
                     gen=pool["max_new_tokens"], batch=R.DECODE_BATCH) for m in local]
    return R.infer_job(works, label="sc_outcomes")


def sc_sft_job(wc):
    p = sc(wc.scale, "predictor")
    seq = R.SEQ_TOKENS if p["hub"] else p["model"]["max_seq_len"]
    return R.train_job(sc_predictor(wc.scale), tokens=train_tokens(p["sft"], seq), seq=seq,
                       batch=p["sft"]["batch_size"], label="sc_sft")


def sc_grpo_job(wc):
    """steps x prompts x group rollouts of the predictor (its reasoning, up to the pool's
    max_new_tokens), scored and trained on, with the frozen SFT model as the KL reference."""
    g, s = sc(wc.scale, "predictor", "grpo"), sc_predictor(wc.scale)
    gen = sc(wc.scale, "outcomes", "pool", "max_new_tokens")
    seqs, seq = g["steps"] * g["prompts"] * g["group"], R.PROMPT_TOKENS + gen
    also = (R.Infer(s, seqs=seqs, prompt=R.PROMPT_TOKENS, gen=gen, batch=min(g["prompts"] * g["group"], R.DECODE_BATCH),
                    shared=True),
            R.Infer(s, seqs=2 * seqs, prompt=seq, batch=1, shared=True))
    return R.train_job(s, tokens=seqs * seq, seq=seq, batch=g["prompts"] * g["group"], also=also,
                       extra_bytes=R.weight_bytes(s) if g["beta"] else 0.0, label="sc_grpo")


def sc_route_job(wc):
    """Predictions of the three predictors (RL, SFT, no-anchor SFT) for every test query and pool model."""
    n = sc(wc.scale, "outcomes", "queries", "n_test") * len(sc(wc.scale, "outcomes", "pool", "members"))
    gen = sc(wc.scale, "outcomes", "pool", "max_new_tokens")
    w = R.Infer(sc_predictor(wc.scale), seqs=n, prompt=R.PROMPT_TOKENS, gen=gen, batch=R.DECODE_BATCH)
    return R.infer_job([w, w, w], label="sc_route")
