"""methods/core/distributed.py + train.train under torch.distributed: two gloo ranks on CPU
train a tiny LlamaForCausalLM on a GLOBAL batch with -100 label padding of unequal counts per
row (and one step where rank 1's rows have no target at all), and must match the
single-process run of the same global batches: loss curve, grad norms, eval losses and final
weights, for DDP and for FSDP2 (`fully_shard` per decoder layer, then the root).

Tolerances: rtol 1e-5 on losses / grad norms / eval losses and atol 1e-5 on weights. The two
runs compute the same sums in a different order (per-rank partial gradients averaged by the
all-reduce or reduce-scatter, per-shard partial norms for clipping under FSDP, per-rank loss
sums averaged for logging), so fp32 rounding (~1e-7 relative per operation) separates them;
over 10 AdamW steps it stays well below 1e-5. A wrong weighting of the -100 padding (a per-rank
mean instead of the token-weighted share) changes the gradient by ~1e-2 relative: the test
checks that this difference really exists in its data (`test_naive_per_rank_mean_differs`).

Rendezvous through a file (FileStore) and gloo on the loopback interface: no port is opened on
any interface (torch's TCPStore, which MASTER_ADDR/MASTER_PORT would use, listens on all).
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from methods.core import runtime, train as T
from methods.core.data import PromptAnswerBatches, pcfg_sentence
from methods.core.models import ModelConfig, build_model
from methods.core.tokenizer import train_tokenizer

torch.set_num_threads(1)

WORLD = 2
BATCH = 5          # odd: rank 0 gets rows 0-2, rank 1 rows 3-4 (tensor_split)
EMPTY_STEP = 3     # at this step rank 1's rows carry no target at all
KILL_STEP = 7      # the interrupted run dies when asked for this batch (last ckpt: step 6)
CFG = dict(steps=10, batch_size=BATCH, lr=3e-3, weight_decay=0.1, warmup_steps=2, grad_clip=0.5,
           log_every=1, eval_every=5, ckpt_every=3, seed=5)
RTOL, ATOL = 1e-5, 1e-5


class Interrupt(RuntimeError):
    pass


def setup():
    """Tokenizer, a fresh model of `seed`, SFT pairs whose answers have different lengths."""
    rng = random.Random(0)
    pairs = []
    for _ in range(40):
        words = pcfg_sentence(rng).split()
        cut = rng.randrange(1, len(words))
        pairs.append((" ".join(words[:cut]) + " ", " ".join(words[cut:])))
    tok = train_tokenizer([p + a + "\n" for p, a in pairs], "char")
    data = PromptAnswerBatches(pairs, tok, end="\n")
    return tok, data


def model_of(tok, seed=0):
    return build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=128), tok, seed)


def global_batch(data, step, kill=False):
    if kill and step == KILL_STEP:
        raise Interrupt("killed")
    b = data.batch(step, BATCH, CFG["seed"])
    if step == EMPTY_STEP:
        b["labels"][3:] = -100   # rank 1's chunk: no targets (its loss term must be exactly 0)
    return b


def run(model, data, eval_batches, workdir: Path, kill=False):
    cfg = T.TrainConfig(**CFG)
    workdir.mkdir(parents=True, exist_ok=True)
    return T.train(model, lambda s: global_batch(data, s, kill), cfg, ckpt_path=workdir / "ckpt.pt",
                   log_path=workdir / "log.jsonl",
                   eval_fn=lambda: {"val_loss": T.evaluate_loss(model, eval_batches)})


# ------------------------------------------------------------------------ the ranks ----
def _worker(rank: int, world: int, store: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", TQDM_DISABLE="1")
    torch.set_num_threads(1)
    from methods.core import distributed
    from methods.core.models import save_model

    out = Path(out)
    writes = []  # every file train() writes on this rank
    real_atomic = T.atomic_path

    def spy(path, *a, **kw):
        writes.append(str(path))
        return real_atomic(path, *a, **kw)

    T.atomic_path = spy
    runtime.activate({"device": "cpu", "dtype": "fp32"})
    assert distributed.init(init_method=f"file://{store}")
    assert distributed.world_size() == world and distributed.rank() == rank
    tok, data = setup()
    eval_batches = data.sequential_batches(8, 2)
    result = {"writes": writes}
    for strategy in ("ddp", "fsdp"):
        runtime.activate({"device": "cpu", "dtype": "fp32", "distributed": strategy})
        assert distributed.strategy() == strategy
        # 1) uninterrupted, writing checkpoints at steps 3 and 6 on the way
        model = model_of(tok)
        rows = run(model, data, eval_batches, out / strategy / "full")
        if strategy == "fsdp":
            local = sum(p.to_local().numel() for p in model.parameters())
            full = sum(p.numel() for p in model.parameters())
            result["fsdp_local_fraction"] = local / full   # really sharded: about 1/world
        weights = distributed.full_state_dict(model)          # collective under FSDP
        to_save = distributed.weights_to_save(model)
        if distributed.is_main():
            save_model(model, tok, out / strategy / "model", state_dict=to_save)
        distributed.barrier()
        # 2) killed at step 7, then 3) resumed in a model of another init
        try:
            run(model_of(tok), data, eval_batches, out / strategy / "resume", kill=True)
            raise AssertionError("the interrupted run did not die")
        except Interrupt:
            pass
        distributed.barrier()   # rank 0 has written the step-6 checkpoint
        result[f"{strategy}_ckpt_after_kill"] = sorted(os.listdir(out / strategy / "resume"))
        resumed = model_of(tok, seed=123)
        rows_resumed = run(resumed, data, eval_batches, out / strategy / "resume")
        weights_resumed = distributed.full_state_dict(resumed)
        result[strategy] = {"rows": rows, "rows_resumed": rows_resumed}
        if distributed.is_main():
            torch.save({"weights": weights, "weights_resumed": weights_resumed},
                       out / f"{strategy}_weights.pt")
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    distributed.shutdown()


def spawn_ranks(tmp_path: Path, timeout_s: float = 240) -> list[dict]:
    ctx = mp.spawn(_worker, args=(WORLD, str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:   # a collective mismatch hangs: fail instead of waiting
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"distributed ranks still running after {timeout_s}s")
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory):
    old = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    tmp = tmp_path_factory.mktemp("dist")
    try:
        results = spawn_ranks(tmp)
        # the single-process reference: the same global batches, no process group
        runtime.reset()
        runtime.activate({"device": "cpu", "dtype": "fp32"})
        tok, data = setup()
        model = model_of(tok)
        rows = run(model, data, data.sequential_batches(8, 2), tmp / "single")
        runtime.reset()
    finally:
        if old is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = old
    return {"ranks": results, "single_rows": rows, "single_model": model, "dir": tmp, "tok": tok}


def _max_rel(a: list[dict], b: list[dict], key: str) -> float:
    xs = [(r[key], s[key]) for r, s in zip(a, b) if key in r]
    assert xs and len(xs) == sum(key in s for s in b)
    return max(abs(x - y) / abs(y) for x, y in xs)


# ---------------------------------------------------------------------------- tests ----
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_ranks_match_single_process(dist_run, strategy):
    single = dist_run["single_rows"]
    rank0 = dist_run["ranks"][0][strategy]["rows"]
    assert [r["step"] for r in rank0] == [r["step"] for r in single]
    diffs = {k: _max_rel(rank0, single, k) for k in ("loss", "grad_norm", "val_loss")}
    print(f"{strategy}: max relative difference vs single process {diffs}")
    assert all(d <= RTOL for d in diffs.values()), diffs
    # clipping was active (pre-clip norms above the threshold), so the FSDP norm path matters
    assert min(r["grad_norm"] for r in single if "grad_norm" in r) > CFG["grad_clip"]
    # every rank returns the same rows (losses averaged over ranks for logging)
    assert dist_run["ranks"][1][strategy]["rows"] == rank0
    state = torch.load(dist_run["dir"] / f"{strategy}_weights.pt", weights_only=True)["weights"]
    ref = dist_run["single_model"].state_dict()
    assert set(state) == set(ref)
    wdiff = max(float((state[k] - ref[k]).abs().max()) for k in ref)
    print(f"{strategy}: max |Δweight| vs single process {wdiff:.2e}")
    assert wdiff <= ATOL
    # and training moved the weights by far more than the tolerance
    tok = dist_run["tok"]
    fresh = model_of(tok).state_dict()
    assert max(float((ref[k] - fresh[k]).abs().max()) for k in ref) > 100 * ATOL


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_only_rank0_writes_and_saved_model_loads(dist_run, strategy):
    from transformers import AutoModelForCausalLM

    r0, r1 = dist_run["ranks"]
    assert r1["writes"] == []                        # rank 1 wrote neither log nor checkpoint
    d = dist_run["dir"] / strategy
    mine = [w for w in r0["writes"] if f"/{strategy}/" in w]
    assert str(d / "full" / "ckpt.pt") in mine and str(d / "full" / "log.jsonl") in mine
    assert sorted(os.listdir(d / "full")) == ["log.jsonl"]           # checkpoint removed at the end
    rows = [json.loads(x) for x in (d / "full" / "log.jsonl").read_text().splitlines()]
    assert rows == r0[strategy]["rows"]
    # the model directory rank 0 saved from the gathered weights loads as a plain HF model
    model = AutoModelForCausalLM.from_pretrained(d / "model")
    assert model.config.architectures == ["LlamaForCausalLM"]
    state = torch.load(dist_run["dir"] / f"{strategy}_weights.pt", weights_only=True)["weights"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_resumed_two_rank_run_equals_uninterrupted(dist_run, strategy):
    r0 = dist_run["ranks"][0]
    assert r0[f"{strategy}_ckpt_after_kill"] == ["ckpt.pt"]     # the step-6 checkpoint, no log yet
    assert r0[strategy]["rows_resumed"] == r0[strategy]["rows"]     # exact, floats included
    w = torch.load(dist_run["dir"] / f"{strategy}_weights.pt", weights_only=True)
    for k, v in w["weights"].items():
        assert torch.equal(v, w["weights_resumed"][k]), k


def test_fsdp_really_shards(dist_run):
    frac = dist_run["ranks"][0]["fsdp_local_fraction"]
    assert 0.4 < frac < 0.6, frac


def test_naive_per_rank_mean_differs(dist_run):
    """The data can tell the token-weighted share from a per-rank mean: on the first global
    batch the mean of the two chunks' mean losses differs from the global mean by far more
    than the tolerance, so the equivalence above is not an accident of equal padding."""
    tok = dist_run["tok"]
    _, data = setup()
    model = model_of(tok)
    b = global_batch(data, 0)
    with torch.no_grad():
        full = float(T.lm_loss(model, b))
        chunks = [float(T.lm_loss(model, {k: v[s] for k, v in b.items()})) for s in (slice(0, 3), slice(3, 5))]
    counts = [int((b["labels"][s] != -100).sum()) for s in (slice(0, 3), slice(3, 5))]
    assert counts[0] / 3 != counts[1] / 2
    weighted = sum(c * x for c, x in zip(counts, chunks)) / sum(counts)
    assert abs(weighted - full) / full < 1e-6
    assert abs(sum(chunks) / 2 - full) / full > 100 * RTOL


def test_single_process_has_no_process_group(monkeypatch):
    from methods.core import distributed

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert not distributed.launched() and distributed.init() is False
    assert not distributed.is_initialized() and distributed.strategy() == "none"
    assert distributed.is_main() and distributed.world_size() == 1
    b = {"input_ids": torch.zeros(3, 4), "labels": torch.zeros(3, 4)}
    assert distributed.local_rows(b) is b
    monkeypatch.setenv("WORLD_SIZE", "1")          # torchrun --nproc-per-node 1: still plain
    assert not distributed.launched()


def test_runtime_distributed_key_is_validated():
    from methods.core.results import InputError

    assert runtime.parse('{"distributed": "fsdp"}').distributed == "fsdp"
    assert runtime.RuntimeSpec().distributed == "ddp"
    with pytest.raises(InputError, match="runtime.distributed"):
        runtime.parse('{"distributed": "zero3"}')
