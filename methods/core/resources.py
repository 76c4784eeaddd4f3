"""Job resources from the model and the workload: GPUs, nodes, host memory and wall time of a
paper-scale job, and its GPU-hours.

The Snakefile imports this module to size every GPU job (`sized` in workflow/rules/common.smk)
and the paper dry run sums the jobs' resources into its GPU-hour plan (methods/core/plan.py),
so it must not import torch. Every assumption is a named constant in the block below.

Parameters (`param_count`): the Llama layout as transformers builds it: token embedding; per
layer q/k/v/o projections (+ q/k/v bias: Qwen2; + per-head q/k RMSNorm: Qwen3), a SwiGLU MLP
(gate, up, down) or a linear router and top-k of E SwiGLU experts (+ always-on shared experts),
two RMSNorms; a final RMSNorm and an LM head unless tied. It equals sum(p.numel()) of
LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and MixtralForCausalLM
(tests/core/test_resources.py). Hub models: config/hub_models.yaml (published counts).

Memory:
  training, sharded over the job's GPUs (FSDP / ZeRO-3) = trainable params x TRAIN_BYTES (bf16
  compute with fp32 master weights: weights 4 + grads 4 + AdamW m, v 8 = 16 B; SGD 8, with
  momentum 12) + frozen params x FROZEN_BYTES; plus on every GPU the activations of one
  micro-batch: micro x seq x (d_model x n_layers x ACT_BYTES + vocab x LOGIT_BYTES).
  ACT_BYTES = 34: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models"), activations per layer s.b.h.(34 + 5as/h) bytes without recomputation;
  the 5as/h attention-score term is absent with SDPA / flash attention.
  inference = params x 2 B (bf16) + KV cache 2 x layers x kv_heads x head_dim x ctx x batch x 2 B
  + fp32 logits of the scored tokens.
GPUs = the smallest count whose share fits GPU_MEM_USABLE x GPU_MEM_BYTES, rounded up to 1, 2, 4,
  8, then whole nodes of 8; a data-parallel job (torchrun / DDP) scales out further, up to
  SCALE_OUT_MAX_GPUS, to finish within TARGET_HOURS.
Time = FLOPs / (GPUs working in parallel x PEAK_FLOPS x MFU) x SAFETY + start-up + weight
  loading. Training 6 N + 6 n_layer n_ctx d_attn FLOPs per token (Kaplan et al. 2020, "Scaling
  Laws for Neural Language Models", Eq. 2.2 and Table 1; N = active parameters that take part in
  matmuls, i.e. without the input embedding), inference 2 N + 2 n_layer n_ctx d_attn per token;
  decoding takes at least the time to stream the weights and the KV cache from HBM once per step.
Host RAM (mem_mb, per node) = max(HOST_MIN_MB, HOST_MARGIN x the bytes each process stages x
  processes on the node), capped at NODE_MEM_MB: an inference job stages its bf16 weights, a
  training job the fp32 state dict it gathers to save.
GPU-hours = GPUs x runtime. Assumptions the numbers rest on: micro-batches of at most
MICRO_BATCH_TOKENS per GPU with gradient accumulation (core.train does not accumulate yet, so a
step whose whole per-GPU batch exceeds that needs it, or activation checkpointing, to fit), and
every token of a sequence counted (no packing losses, no early stops: upper bounds for decoding).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

# ---- the target machine and the assumptions (the one place to change them) -------------------
GPU = "H100 SXM 80GB"
GPU_MEM_BYTES = 80e9          # H100 SXM / A100 80GB
GPU_MEM_USABLE = 0.9          # the rest: CUDA context, allocator fragmentation, NCCL buffers
GPUS_PER_NODE = 8
MAX_GPUS = 64                 # a job that needs more is refused (a config error, not a plan)
PEAK_FLOPS = 989e12           # H100 SXM dense BF16 tensor-core peak (NVIDIA H100 datasheet; 1979 with 2:4 sparsity)
HBM_BYTES_PER_S = 3.35e12     # H100 SXM HBM3 bandwidth (datasheet)
MFU = {"train": 0.40,         # model FLOPs utilisation: a well-tuned bf16 training loop
       "prefill": 0.30,       # scoring / prefill (loglikelihood, perplexity): compute-bound forwards
       "decode": 0.10}        # batched autoregressive generation
MBU = 0.6                     # fraction of HBM bandwidth a decode step achieves
SAFETY = 1.5                  # runtime = estimate x SAFETY (+ fixed costs below)
STARTUP_S = 300               # job start, imports, lm-eval task set-up, checkpoint writing
LOAD_BYTES_PER_S = 1e9        # weights read from the shared file system into GPU memory
MIN_RUNTIME_MIN = 10
ACT_BYTES = 34                # per token x d_model x layer (Korthikanti et al. 2022, see above)
LOGIT_BYTES_TRAIN = 6         # per token x vocab: bf16 logits + their fp32 copy for the loss
LOGIT_BYTES_SCORE = 4         # per scored token x vocab: fp32 logits of a loglikelihood forward
MICRO_BATCH_TOKENS = 16384    # per GPU and micro-step; larger batches accumulate gradients
ACT_SHARE = 0.5               # the micro-batch is halved until its activations take <= half a GPU
DECODE_BATCH = 64             # concurrent sequences of one generate call when the config sets none
TARGET_HOURS = 48             # data-parallel jobs scale out to finish within a typical partition limit
SCALE_OUT_MAX_GPUS = 8        # ... on one node (a multi-node launch needs the MPI-style set-up in
                              # profiles/slurm/config.yaml); memory alone may still ask for more
HOST_MIN_MB = 32000           # host RAM of a GPU job: max(this, HOST_MARGIN x the bytes it stages)
HOST_MARGIN = 1.2
NODE_MEM_MB = 1_000_000       # host RAM of one GPU node: the cap of a job's --mem
CPUS_PER_GPU = 8              # --cpus-per-task of a GPU job: this x its GPUs on a node
TRAIN_BYTES = {"adamw": 16, "adam": 16,     # fp32 weights 4 + fp32 grads 4 + two fp32 moments 8
               "sgd_momentum": 12, "sgd": 8,
               "none": 8}                   # gradients only (no optimizer step)
FROZEN_BYTES = 4              # frozen weights of a training job: fp32 (master_fp32 runtime policy)
INFER_BYTES = 2               # weights of an inference job: bf16
PROMPT_TOKENS = 512           # a prompt where the config gives no length (nominal)
SEQ_TOKENS = 2048             # a training sequence where the config gives no length (nominal)
VL_ITEM_TOKENS = 1024         # image + text tokens of one vision-language item (nominal)
CHAR_VOCAB = 256              # our generated tasks' character tokenizers (upper bound)
LORA_RANK = 16
RESOURCE_KEYS = ("mem_mb", "runtime", "gpu", "nodes", "cpus_per_task")


# ---- models ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder LM; `total`/`active` (published counts of hub models with parts the
    formula does not cover: vision towers, MLA, talkers) override the count from the shape."""
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    head_dim: int = 0             # 0: d_model // n_heads
    tie_embeddings: bool = False
    attn_bias: bool = False       # bias on q, k, v (Qwen2)
    qk_norm: bool = False         # RMSNorm over head_dim on q and k (Qwen3)
    n_experts: int = 0            # > 0: every layer's MLP is a top-k mixture of SwiGLU experts
    k: int = 0
    expert_d_ff: int = 0          # 0: d_ff
    n_shared: int = 0             # always-on experts of width expert_d_ff
    total: int = 0
    active: int = 0
    max_context: int = 0
    name: str = ""

    @property
    def hd(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def d_attn(self) -> int:
        return self.n_heads * self.hd


def param_count(s: ModelSpec, active: bool = False) -> int:
    """Total (or, for an MoE, active: k routed + shared experts) parameters."""
    if s.total:
        return (s.active or s.total) if active else s.total
    d, q, kv = s.d_model, s.n_heads * s.hd, s.n_kv_heads * s.hd
    attn = d * q + 2 * d * kv + q * d + (q + 2 * kv if s.attn_bias else 0) + (2 * s.hd if s.qk_norm else 0)
    if s.n_experts:
        used = s.k if active else s.n_experts
        mlp = d * s.n_experts + (used + s.n_shared) * 3 * d * (s.expert_d_ff or s.d_ff)
    else:
        mlp = 3 * d * s.d_ff
    return s.vocab * d * (1 if s.tie_embeddings else 2) + s.n_layers * (attn + mlp + 2 * d) + d


def matmul_params(s: ModelSpec) -> int:
    """Active parameters a token multiplies with: all but the input embedding (a lookup); a tied
    head is a matmul with the embedding matrix."""
    return param_count(s, active=True) - (0 if s.tie_embeddings else s.vocab * s.d_model)


def layer_params(s: ModelSpec) -> int:
    """Parameters of one transformer block (the unit block-wise PTQ trains)."""
    body = param_count(s) - s.vocab * s.d_model * (1 if s.tie_embeddings else 2) - s.d_model
    return body // s.n_layers


def lora_params(s: ModelSpec, rank: int = LORA_RANK) -> int:
    """LoRA adapters on every attention and (dense) MLP projection: rank x (in + out) each."""
    d, q, kv = s.d_model, s.d_attn, s.n_kv_heads * s.hd
    ff = s.expert_d_ff or s.d_ff
    per_layer = rank * ((d + q) * 2 + (d + kv) * 2 + 3 * (d + ff))
    return s.n_layers * per_layer


def spec_from_config(model: dict, vocab: int, *, n_experts: int = 0, k: int = 0, expert_d_ff: int = 0,
                     n_shared: int = 0, name: str = "") -> ModelSpec:
    """Our own models: a `model:` section of a scale file (methods/core/models.ModelConfig)."""
    return ModelSpec(d_model=model["d_model"], n_layers=model["n_layers"], n_heads=model["n_heads"],
                     n_kv_heads=model.get("n_kv_heads") or model["n_heads"], d_ff=model["d_ff"], vocab=vocab,
                     tie_embeddings=model.get("tie_embeddings", False), n_experts=n_experts, k=k,
                     expert_d_ff=expert_d_ff, n_shared=n_shared,
                     max_context=model.get("max_seq_len", 0), name=name)


def load_hub_models(path: str | Path) -> dict:
    from methods.core.config import load_yaml

    return load_yaml(path)


def hub_spec(table: dict, model_id: str) -> ModelSpec:
    """A hub model's spec from config/hub_models.yaml."""
    e = table.get(model_id)
    if e is None:
        raise KeyError(f"hub model {model_id!r} is not in config/hub_models.yaml")
    if not e.get("params") or not e.get("hidden"):
        raise KeyError(f"hub model {model_id!r}: config/hub_models.yaml has no parameter count or shape "
                       f"({e.get('kind')}), so no GPU job can be sized for it")
    return ModelSpec(d_model=e["hidden"], n_layers=e["layers"], n_heads=e["heads"], n_kv_heads=e["kv_heads"],
                     head_dim=e["head_dim"], d_ff=e.get("d_ff", 0), vocab=e["vocab"],
                     tie_embeddings=e.get("tied", False), attn_bias=e.get("attn_bias", False),
                     qk_norm=e.get("qk_norm", False), n_experts=e.get("experts", 0), k=e.get("experts_per_token", 0),
                     total=int(e["params"]), active=int(e.get("active") or e["params"]),
                     max_context=e.get("context", 0), name=model_id)


def spec_from_hf_config(cfg: dict, name: str = "") -> ModelSpec:
    """A model's spec from its transformers config.json (a local model directory: the paper-path
    stand-ins, a pre-downloaded snapshot); a multimodal config's language model (`text_config`)."""
    c = cfg.get("text_config") or cfg
    heads = c["num_attention_heads"]
    experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or 0
    return ModelSpec(d_model=c["hidden_size"], n_layers=c["num_hidden_layers"], n_heads=heads,
                     n_kv_heads=c.get("num_key_value_heads") or heads,
                     head_dim=c.get("head_dim") or c["hidden_size"] // heads,
                     d_ff=(c.get("moe_intermediate_size") if experts else None) or c.get("intermediate_size", 0),
                     vocab=c["vocab_size"], tie_embeddings=bool(cfg.get("tie_word_embeddings", c.get("tie_word_embeddings", False))),
                     attn_bias=bool(c.get("attention_bias", c.get("model_type") == "qwen2")),
                     qk_norm=c.get("model_type") == "qwen3", n_experts=experts, k=c.get("num_experts_per_tok", 0),
                     max_context=c.get("max_position_embeddings", 0), name=name)


def model_spec(table: dict, model_id: str) -> ModelSpec:
    """A hub id's spec from config/hub_models.yaml, or a local model directory's from its config.json."""
    if model_id not in table and (Path(model_id) / "config.json").is_file():
        import json

        return spec_from_hf_config(json.loads((Path(model_id) / "config.json").read_text()), model_id)
    return hub_spec(table, model_id)


# Keys of a scale file whose string values name models (and, for `experts`, a dict of them);
# hub_model_refs collects them for the hub-table test. Everything else with an org/name shape is
# a dataset or a code repository (DATASET_KEYS).
MODEL_KEYS = {"hub_id", "eor_model_id", "tokenizer", "hub", "judge", "encoder", "router_base",
              "lora_base", "model", "models", "vl_models", "ar_bases", "baselines", "experts"}
DATASET_KEYS = {"source", "train_hub", "id", "dataset", "datasets", "benchmarks", "train_data", "eval_data",
                "rl_dataset", "eval_datasets", "corpus", "train_dataset", "sft_dataset", "ppl_source"}


def hub_model_refs(node, key: str = "", path: str = "") -> dict[str, list[str]]:
    """{model id: [dotted paths]} of every model a scale config names (hub ids and endpoint models)."""
    out: dict[str, list[str]] = {}

    def add(value, where):
        if isinstance(value, str) and value:
            out.setdefault(value, []).append(where)

    if isinstance(node, dict):
        for k, v in node.items():
            p = f"{path}.{k}" if path else str(k)
            if k in MODEL_KEYS and isinstance(v, str):
                add(v, p)
            elif k in MODEL_KEYS and isinstance(v, list):
                for x in v:
                    add(x, p)
            elif k == "experts" and isinstance(v, dict):
                for name, x in v.items():
                    add(x, f"{p}.{name}")
            else:
                for m, ps in hub_model_refs(v, k, p).items():
                    out.setdefault(m, []).extend(ps)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            for m, ps in hub_model_refs(v, key, f"{path}[{i}]").items():
                out.setdefault(m, []).extend(ps)
    return out


# ---- memory (bytes) --------------------------------------------------------------------------
def usable_gpu_bytes() -> float:
    return GPU_MEM_BYTES * GPU_MEM_USABLE


def weight_bytes(s: ModelSpec, bytes_per_param: float = INFER_BYTES) -> float:
    return param_count(s) * bytes_per_param


def train_state_bytes(s: ModelSpec, optimizer: str = "adamw", trainable: float = 1.0) -> float:
    n = param_count(s)
    return n * trainable * TRAIN_BYTES[optimizer] + n * (1 - trainable) * FROZEN_BYTES


def activation_bytes(s: ModelSpec, micro: int, seq: int) -> float:
    return micro * seq * (s.d_model * s.n_layers * ACT_BYTES + s.vocab * LOGIT_BYTES_TRAIN)


def micro_batch(s: ModelSpec, batch: int, seq: int) -> int:
    """Sequences per GPU and micro-step: <= MICRO_BATCH_TOKENS tokens and activations <= ACT_SHARE
    of a GPU (at least one sequence)."""
    m = max(1, min(batch, MICRO_BATCH_TOKENS // max(seq, 1)))
    while m > 1 and activation_bytes(s, m, seq) > ACT_SHARE * usable_gpu_bytes():
        m //= 2
    return m


def kv_cache_bytes(s: ModelSpec, batch: int, ctx: float) -> float:
    return 2 * s.n_layers * s.n_kv_heads * s.hd * ctx * batch * INFER_BYTES


# ---- compute (FLOPs, seconds on one GPU) -------------------------------------------------------
def forward_flops(s: ModelSpec, tokens: float, keys: float) -> float:
    """Forward FLOPs of `tokens` tokens that each attend to `keys` keys on average (a causal
    sequence of length L: keys = L / 2): 2 N + 4 n_layer keys d_attn per token (QK^T and AV),
    i.e. Kaplan et al.'s 2 N + 2 n_layer n_ctx d_attn for a causal context."""
    return tokens * (2 * matmul_params(s) + 4 * s.n_layers * keys * s.d_attn)


def train_flops(s: ModelSpec, tokens: float, seq: int, trainable: float = 1.0) -> float:
    """Forward + backward: 3x the forward with every weight trained (6 N per token, Kaplan et al.
    2020), (2 + trainable fraction)x when most weights are frozen (activation gradients are still
    needed, weight gradients only for the trained part)."""
    return (2 + trainable) * forward_flops(s, tokens, seq / 2)


def compute_seconds(flops: float, kind: str) -> float:
    return flops / (PEAK_FLOPS * MFU[kind])


@dataclass(frozen=True)
class Infer:
    """One model's inference work in a job: `seqs` sequences of `prompt` prefilled (scored)
    tokens and `gen` generated ones, `batch` at a time. `block`: tokens computed per generated
    token (a diffusion LM recomputes its whole block at each step; 1 for autoregressive).
    shared: the weights are another part of the job's (the policy being trained generating its
    own rollouts), so only its KV cache and logits add memory."""
    spec: ModelSpec
    seqs: float = 0
    prompt: int = 0
    gen: int = 0
    batch: int = 1
    block: int = 1
    shared: bool = False

    def own_weight_bytes(self) -> float:
        return 0.0 if self.shared else weight_bytes(self.spec)

    def gpu_bytes(self) -> float:
        b = max(1, self.batch)
        logits = b * (self.prompt if not self.gen else 1) * self.spec.vocab * LOGIT_BYTES_SCORE
        return self.own_weight_bytes() + kv_cache_bytes(self.spec, b, self.prompt + self.gen) + logits

    def seconds(self) -> float:
        s, b = self.spec, max(1, self.batch)
        t = compute_seconds(forward_flops(s, self.seqs * self.prompt, self.prompt / 2), "prefill")
        if self.gen:
            tokens, keys = self.seqs * self.gen, self.prompt + self.gen / 2
            compute = compute_seconds(forward_flops(s, tokens * self.block, keys), "decode")
            streamed = INFER_BYTES * min(param_count(s), param_count(s, active=True) * b) + kv_cache_bytes(s, b, keys)
            t += max(compute, tokens / b * streamed / (HBM_BYTES_PER_S * MBU))
        return t


# ---- a job -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    gpus: int
    nodes: int
    mem_mb: int
    runtime: int                  # minutes
    gpu_mem_gb: float             # what each GPU holds
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.runtime / 60

    def resources(self, threads: int = 1) -> dict:
        """Snakemake resources (profiles/slurm/config.yaml says how each maps to sbatch)."""
        per_node = math.ceil(self.gpus / self.nodes)
        return {"mem_mb": self.mem_mb, "runtime": self.runtime, "gpu": self.gpus, "nodes": self.nodes,
                "cpus_per_task": max(threads, CPUS_PER_GPU * per_node)}


def round_gpus(n: int) -> int:
    """1, 2, 4, 8 on one node, then whole nodes."""
    if n <= GPUS_PER_NODE:
        return 1 << max(0, math.ceil(math.log2(max(n, 1))))
    return math.ceil(n / GPUS_PER_NODE) * GPUS_PER_NODE


def size(*, sharded: float = 0.0, per_gpu: float = 0.0, seconds: float = 0.0, load: float = 0.0,
         host: float = 0.0, parallel: bool = False, gpus: int | None = None, label: str = "") -> Job:
    """A job from its memory and compute. sharded: bytes spread over the job's GPUs; per_gpu:
    bytes every GPU holds; seconds: compute time on one GPU; parallel: the GPUs share the compute
    (torchrun / DDP ranks) instead of only holding shards (one process, device_map), which runs
    at one GPU's speed; load: weight bytes read from disk; host: host RAM each process stages;
    gpus: a fixed count (a DDP world size)."""
    usable, notes = usable_gpu_bytes(), []
    if gpus is None:
        free = usable - per_gpu
        if free <= 0:
            raise ValueError(f"{label}: {per_gpu / 1e9:.0f} GB on every GPU exceed the usable "
                             f"{usable / 1e9:.0f} GB of a {GPU} (methods/core/resources.py)")
        need = max(1, math.ceil(sharded / free))
        if parallel:
            need = max(need, min(SCALE_OUT_MAX_GPUS, math.ceil(seconds * SAFETY / 3600 / TARGET_HOURS)))
        gpus = round_gpus(need)
        if gpus > MAX_GPUS:
            raise ValueError(f"{label}: needs {gpus} GPUs > MAX_GPUS {MAX_GPUS} (methods/core/resources.py)")
    per = sharded / gpus + per_gpu
    if per > usable:
        notes.append(f"{label}: each of its {gpus} GPUs would hold ~{per / 1e9:.0f} GB, more than the "
                     f"{usable / 1e9:.0f} GB usable of an {GPU}")
    nodes = math.ceil(gpus / GPUS_PER_NODE)
    wall = seconds / (gpus if parallel else 1) * SAFETY + STARTUP_S + load / LOAD_BYTES_PER_S
    runtime = max(MIN_RUNTIME_MIN, math.ceil(wall / 60))
    if runtime > TARGET_HOURS * 60:
        notes.append(f"{label}: ~{runtime / 60:.0f} h per job > {TARGET_HOURS} h"
                     + (f" on {gpus} GPUs (past a partition time limit it must resume from its checkpoint)" if parallel
                        else " in one process (a torchrun launch would scale it out)"))
    ranks = min(gpus, GPUS_PER_NODE) if parallel else 1
    mem_mb = min(NODE_MEM_MB, max(HOST_MIN_MB, math.ceil(HOST_MARGIN * host * ranks / 1e6)))
    return Job(gpus=gpus, nodes=nodes, mem_mb=mem_mb, runtime=runtime, gpu_mem_gb=round(per / 1e9, 1),
               notes=tuple(notes))


def train_job(s: ModelSpec, *, tokens: float, seq: int, batch: int, optimizer: str = "adamw",
              trainable: float = 1.0, parallel: bool = False, gpus: int | None = None, micro: int | None = None,
              replicated: bool = False, also: tuple[Infer, ...] = (), extra_bytes: float = 0.0,
              extra_per_gpu: float = 0.0, extra_seconds: float = 0.0, label: str = "") -> Job:
    """Training `tokens` tokens in sequences of `seq`, `batch` sequences per step. replicated: a
    DDP replica on every GPU (nothing sharded); also: inference in the same process (rollouts,
    teachers, a reference model), whose memory and time add."""
    m = micro or micro_batch(s, batch, seq)
    states = train_state_bytes(s, optimizer, trainable) + extra_bytes + sum(w.gpu_bytes() for w in also)
    act = activation_bytes(s, m, seq) + extra_per_gpu
    seconds = (compute_seconds(train_flops(s, tokens, seq, trainable), "train") + extra_seconds
               + sum(w.seconds() for w in also))
    load = weight_bytes(s) + sum(w.own_weight_bytes() for w in also)
    host = param_count(s) * 4  # the fp32 state dict gathered on the host to save it
    if replicated:
        return size(per_gpu=states + act, seconds=seconds, load=load, host=host, parallel=parallel, gpus=gpus,
                    label=label)
    return size(sharded=states, per_gpu=act, seconds=seconds, load=load, host=host, parallel=parallel, gpus=gpus,
                label=label)


def infer_job(works: list[Infer], *, concurrent: bool = False, extra_bytes: float = 0.0,
              label: str = "") -> Job:
    """Inference with one model after the other (memory: the largest; concurrent: all at once,
    memory: the sum); extra_bytes stay resident throughout (e.g. models used alongside)."""
    mems = [w.gpu_bytes() for w in works] or [0.0]
    sharded = (sum(mems) if concurrent else max(mems)) + extra_bytes
    weights = [w.own_weight_bytes() for w in works]
    host = (sum(weights) if concurrent else max(weights, default=0.0)) + extra_bytes
    return size(sharded=sharded, seconds=sum(w.seconds() for w in works), load=sum(weights), host=host,
                label=label)


def load_job(s: ModelSpec, label: str = "") -> Job:
    """A step that loads a model and saves it (a copy, a record of the hub weights)."""
    return infer_job([Infer(s)], label=label)


# ---- lm-eval task sizes --------------------------------------------------------------------------
# (items, requests per item, tokens per request, generated tokens per request): items = the
# task's evaluation split (lm-eval 0.4 task configs / the datasets' cards); requests = answer
# choices of a loglikelihood task; tokens are rough averages (context + continuation, few-shot
# prompts included), good for an order of magnitude, not measured. Unknown tasks: LM_EVAL_DEFAULT.
LM_EVAL_TASKS = {
    "arc_easy": (2376, 4, 60, 0), "arc_challenge": (1172, 4, 70, 0), "boolq": (3270, 2, 160, 0),
    "copa": (100, 2, 25, 0), "commonsense_qa": (1221, 5, 50, 0), "hellaswag": (10042, 4, 110, 0),
    "openbookqa": (500, 4, 35, 0), "piqa": (1838, 2, 60, 0), "sciq": (1000, 4, 130, 0),
    "social_iqa": (1954, 3, 50, 0), "winogrande": (1267, 2, 40, 0), "lambada_openai": (5153, 1, 100, 0),
    "wikitext": (62, 1, 4000, 0), "arithmetic": (20000, 1, 25, 0),       # 10 subtasks x 2000
    "mmlu": (14042, 4, 150, 0), "gsm8k": (1319, 1, 900, 256), "ifeval": (541, 1, 80, 1280),
    "humaneval": (164, 1, 150, 512), "mbpp": (500, 1, 600, 256), "minerva_math": (5000, 1, 1000, 512),
    "minerva_math500": (500, 1, 1000, 512), "aime24": (30, 1, 200, 4096), "aime25": (30, 1, 200, 4096),
    "gpqa_diamond_zeroshot": (198, 4, 300, 0),
    "longbench": (4750, 1, 10000, 128),     # LongBench v1: 21 datasets, ~4.75k items, long contexts
    "ruler": (6500, 1, 0, 64),              # 13 tasks x 500 samples per max_seq_length; prompt = that length
}
LM_EVAL_DEFAULT = (1000, 1, PROMPT_TOKENS, 0)


def lm_eval_works(s: ModelSpec, tasks: list[str], *, batch: int, limit: int | None = None,
                  max_gen: int | None = None, seq_lengths: list[int] | None = None) -> list[Infer]:
    """One model's lm-eval requests as inference work (RULER once per max_seq_length)."""
    out = []
    for t in tasks:
        items, req, tokens, gen = LM_EVAL_TASKS.get(t, LM_EVAL_DEFAULT)
        if limit:
            items = min(items, limit)
        if gen and max_gen:
            gen = max_gen
        for L in (seq_lengths or [4096]) if tokens == 0 else [tokens]:
            out.append(Infer(s, seqs=items * req, prompt=L, gen=gen, batch=batch))
    return out
