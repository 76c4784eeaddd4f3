"""methods/core/resources.py: the parameter count equals transformers' models exactly; memory,
GPU, runtime and host-memory formulas equal hand computations; the hub table covers every model
config/scales/paper.yaml names and agrees with the formula where it is computed from a shape."""
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from methods.core import resources as R

ROOT = Path(__file__).resolve().parents[2]
HUB = R.load_hub_models(ROOT / "config" / "hub_models.yaml")


def _numel(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("kv", [4, 2])
def test_param_count_equals_llama(tie, kv):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=176, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=kv, tie_word_embeddings=tie,
                      attention_bias=False, mlp_bias=False)
    spec = R.ModelSpec(d_model=64, n_layers=3, n_heads=4, n_kv_heads=kv, d_ff=176, vocab=97, tie_embeddings=tie)
    assert R.param_count(spec) == _numel(LlamaForCausalLM(cfg))


def test_param_count_equals_our_model_zoo():
    """spec_from_config reads a scale file's `model:` section as methods/core/models builds it."""
    from transformers import LlamaForCausalLM

    from methods.core.models import ModelConfig, llama_config

    class Tok:  # what llama_config reads from a tokenizer
        pad_token_id, eos_token_id = 0, 1

        def __len__(self):
            return 131

    model = {"d_model": 96, "n_layers": 2, "n_heads": 6, "n_kv_heads": None, "d_ff": 256, "max_seq_len": 64,
             "tie_embeddings": True, "rope_theta": 10000.0, "norm_eps": 1e-5, "init_std": 0.02}
    hf = LlamaForCausalLM(llama_config(ModelConfig(**model), Tok()))
    assert R.param_count(R.spec_from_config(model, vocab=131)) == _numel(hf)


def test_param_count_equals_qwen2_with_attention_bias():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=151, hidden_size=96, intermediate_size=200, num_hidden_layers=2,
                      num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False)
    spec = R.ModelSpec(d_model=96, n_layers=2, n_heads=6, n_kv_heads=2, d_ff=200, vocab=151, attn_bias=True)
    assert R.param_count(spec) == _numel(Qwen2ForCausalLM(cfg))


def test_param_count_equals_qwen3_with_qk_norm():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=120, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)
    spec = R.ModelSpec(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, d_ff=160, vocab=120,
                       tie_embeddings=True, qk_norm=True)
    assert R.param_count(spec) == _numel(Qwen3ForCausalLM(cfg))


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_local_model_dir_is_sized_from_its_config_json(tmp_path, family):
    """A local model directory (a paper-path stand-in, a downloaded snapshot) that the hub table
    does not list is sized from its config.json, with the same count as the model."""
    import transformers

    kw = dict(vocab_size=101, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, tie_word_embeddings=family == "qwen3")
    cfg_cls, model_cls = {"qwen2": ("Qwen2Config", "Qwen2ForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
                          "llama": ("LlamaConfig", "LlamaForCausalLM")}[family]
    cfg = getattr(transformers, cfg_cls)(**kw)
    cfg.save_pretrained(tmp_path)
    spec = R.model_spec({}, str(tmp_path))
    assert R.param_count(spec) == _numel(getattr(transformers, model_cls)(cfg))


def test_param_count_equals_mixtral_total_and_active():
    from transformers import MixtralConfig, MixtralForCausalLM

    cfg = MixtralConfig(vocab_size=90, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=6, num_experts_per_tok=2,
                        tie_word_embeddings=False)
    spec = R.ModelSpec(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=96, vocab=90, n_experts=6, k=2)
    model = MixtralForCausalLM(cfg)
    assert R.param_count(spec) == _numel(model)
    # active: everything but the (E - k) unused experts of each layer
    assert R.param_count(spec, active=True) == _numel(model) - 2 * (6 - 2) * 3 * 64 * 96


# ---- the hub table ---------------------------------------------------------------------------------
def test_every_model_named_in_paper_yaml_has_an_entry():
    cfg = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())
    refs = R.hub_model_refs(cfg)
    assert len(refs) > 50
    missing = {m: ps for m, ps in refs.items() if m not in HUB}
    assert not missing, f"add these to config/hub_models.yaml: {missing}"


def test_no_model_hides_under_an_unknown_key():
    """Every org/name string of paper.yaml is a model reference (hub_model_refs) or sits under a
    key that names datasets or code (DATASET_KEYS); a new model key must be added to MODEL_KEYS."""
    import re

    cfg = yaml.safe_load((ROOT / "config" / "scales" / "paper.yaml").read_text())
    refs = R.hub_model_refs(cfg)
    stray = []

    def walk(node, key):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and re.fullmatch(r"[\w.\-]+/[\w.\-]+", node):
            if node not in refs and key not in R.DATASET_KEYS:
                stray.append((key, node))

    walk(cfg, "")
    assert not stray


def test_hub_entries_are_complete_and_shape_counts_agree():
    for name, e in HUB.items():
        assert e["kind"] in ("model", "api", "tokenizer"), name
        assert e.get("source"), name
        if e["kind"] == "model":
            spec = R.hub_spec(HUB, name)
            assert R.param_count(spec, active=True) <= R.param_count(spec), name
            assert spec.hd * spec.n_heads > 0 and spec.max_context > 0, name
        if e.get("params") and e.get("hidden") and e["source"].startswith("shape"):
            from_shape = R.param_count(replace(R.hub_spec(HUB, name), total=0, active=0))
            assert from_shape == pytest.approx(e["params"], rel=1e-3), name
            if e.get("active"):
                active = R.param_count(replace(R.hub_spec(HUB, name), total=0, active=0), active=True)
                assert active == pytest.approx(e["active"], rel=1e-3), name


def test_published_counts():
    """Spot checks against the model cards' parameter counts."""
    assert R.param_count(R.hub_spec(HUB, "Qwen/Qwen2.5-7B-Instruct")) / 1e9 == pytest.approx(7.61, abs=0.01)
    assert R.param_count(R.hub_spec(HUB, "meta-llama/Llama-3.1-8B")) / 1e9 == pytest.approx(8.03, abs=0.01)
    q = R.hub_spec(HUB, "qwen/qwen3-235b-a22b")
    assert (R.param_count(q) / 1e9, R.param_count(q, active=True) / 1e9) == pytest.approx((235, 22), abs=0.5)


def test_api_and_tokenizer_entries_cannot_size_a_gpu_job():
    with pytest.raises(KeyError, match="no parameter count"):
        R.hub_spec(HUB, "gpt-4.1")
    with pytest.raises(KeyError, match="not in config/hub_models.yaml"):
        R.hub_spec(HUB, "nobody/nothing")


# ---- memory, GPUs, runtime: hand computations ----------------------------------------------------
SPEC = R.ModelSpec(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, vocab=128256)  # Llama-3.1-8B
N = 8_030_261_248
GB = 1e9


def test_llama_8b_count():
    assert R.param_count(SPEC) == N
    assert R.matmul_params(SPEC) == N - 128256 * 4096


def test_training_memory_and_gpus_by_hand():
    states = R.train_state_bytes(SPEC, "adamw")
    assert states == 16 * N
    assert R.train_state_bytes(SPEC, "sgd") == 8 * N < states
    assert R.train_state_bytes(SPEC, "adamw", trainable=0.25) == pytest.approx(0.25 * N * 16 + 0.75 * N * 4)
    # micro-batch: 16384 tokens / 4096 = 4 sequences; 4 x 4096 x (4096 x 32 x 34 + 128256 x 6) bytes
    act4 = 4 * 4096 * (4096 * 32 * 34 + 128256 * 6)
    assert R.activation_bytes(SPEC, 4, 4096) == act4
    # halved while above half of the usable 72 GB: 4 sequences 86 GB, 2 43 GB, 1 21 GB
    assert R.micro_batch(SPEC, batch=64, seq=4096) == 1
    act = act4 / 4
    job = R.train_job(SPEC, tokens=1e9, seq=4096, batch=64)
    usable = 0.9 * 80 * GB
    need = math.ceil(states / (usable - act))
    assert job.gpus == 1 << math.ceil(math.log2(need)) == 4
    assert job.nodes == 1
    assert job.gpu_mem_gb == pytest.approx((states / 4 + act) / GB, abs=0.05)


def test_training_runtime_by_hand():
    tokens, seq = 2e9, 4096
    flops = 3 * tokens * (2 * R.matmul_params(SPEC) + 4 * 32 * (seq / 2) * 4096)  # 6N + 6 L n_ctx d_attn
    assert R.train_flops(SPEC, tokens, seq) == pytest.approx(flops)
    one_gpu_s = flops / (989e12 * 0.40)
    single = R.train_job(SPEC, tokens=tokens, seq=seq, batch=64)
    load = 2 * N / 1e9
    assert single.runtime == max(10, math.ceil((one_gpu_s * 1.5 + 300 + load) / 60))  # one process: one GPU's speed
    parallel = R.train_job(SPEC, tokens=tokens, seq=seq, batch=64, parallel=True)
    assert parallel.gpus == single.gpus  # 6 GPU-hours fit the 48 h target already
    assert parallel.runtime == max(10, math.ceil((one_gpu_s / parallel.gpus * 1.5 + 300 + load) / 60))
    assert parallel.gpu_hours == parallel.gpus * parallel.runtime / 60


def test_data_parallel_jobs_scale_out_to_the_target_time():
    long = R.train_job(SPEC, tokens=2e11, seq=4096, batch=512, parallel=True)
    assert long.gpus == 8 and long.nodes == 1  # ~1,900 GPU-hours: a full node, not more (one-node launch)


def test_inference_memory_and_runtime_by_hand():
    w = R.Infer(SPEC, seqs=100, prompt=1000, gen=500, batch=8)
    kv = 2 * 32 * 8 * 128 * 1500 * 8 * 2
    assert R.kv_cache_bytes(SPEC, 8, 1500) == kv
    assert w.gpu_bytes() == 2 * N + kv + 8 * 1 * 128256 * 4
    prefill = 100 * 1000 * (2 * R.matmul_params(SPEC) + 4 * 32 * 500 * 4096) / (989e12 * 0.30)
    keys = 1000 + 250
    compute = 100 * 500 * (2 * R.matmul_params(SPEC) + 4 * 32 * keys * 4096) / (989e12 * 0.10)
    stream = 100 * 500 / 8 * (2 * N + R.kv_cache_bytes(SPEC, 8, keys)) / (3.35e12 * 0.6)
    assert stream > compute  # batch-8 decoding is bandwidth-bound
    assert w.seconds() == pytest.approx(prefill + stream)
    job = R.infer_job([w])
    assert job.gpus == 1 and job.runtime == max(10, math.ceil((w.seconds() * 1.5 + 300 + 2 * N / 1e9) / 60))
    assert job.mem_mb == max(32000, math.ceil(1.2 * 2 * N / 1e6))


def test_gpus_grow_with_the_model():
    """A 32B model's inference asks for more GPUs and host memory than a 1B one; 70B for more still."""
    def job(name):  # 16 sequences at a time of a 4k prompt and 1k generated tokens
        return R.infer_job([R.Infer(R.hub_spec(HUB, name), seqs=1000, prompt=4096, gen=1024, batch=16)])

    small, big, huge = job("Qwen/Qwen3-0.6B"), job("Qwen/Qwen3-32B"), job("meta-llama/Llama-3.3-70B-Instruct")
    assert small.gpus == 1 < big.gpus == 2 < huge.gpus == 4
    assert small.mem_mb < big.mem_mb < huge.mem_mb
    assert small.runtime < big.runtime < huge.runtime
    assert R.load_job(R.hub_spec(HUB, "Qwen/Qwen3-32B")).gpus == 1  # 65.5 GB of bf16 weights alone fit


def test_gpu_rounding_and_limits():
    assert [R.round_gpus(n) for n in (1, 2, 3, 5, 8, 9, 17)] == [1, 2, 4, 8, 8, 16, 24]
    assert R.size(sharded=10 * 72e9).gpus == 16 and R.size(sharded=10 * 72e9).nodes == 2
    with pytest.raises(ValueError, match="MAX_GPUS"):
        R.size(sharded=100 * 72e9)
    with pytest.raises(ValueError, match="on every GPU"):
        R.size(per_gpu=80e9)


def test_replicated_ranks_get_the_world_size_and_a_fit_note():
    job = R.train_job(SPEC, tokens=1e8, seq=4096, batch=64, gpus=8, micro=8, replicated=True, parallel=True,
                      label="ddp 8B")
    assert (job.gpus, job.nodes) == (8, 1)
    assert job.gpu_mem_gb > 72 and any("ddp 8B" in n and "GB" in n for n in job.notes)
    assert job.resources(threads=2) == {"mem_mb": job.mem_mb, "runtime": job.runtime, "gpu": 8, "nodes": 1,
                                        "cpus_per_task": 64}


def test_lm_eval_works_follow_the_task_table():
    ws = R.lm_eval_works(SPEC, ["hellaswag", "gsm8k", "ruler", "unknown_task"], batch=4, limit=100,
                         seq_lengths=[65536, 98304])
    assert [(w.seqs, w.prompt, w.gen) for w in ws] == [(400, 110, 0), (100, 900, 256), (100, 65536, 64),
                                                       (100, 98304, 64), (100, 512, 0)]
