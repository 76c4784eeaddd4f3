"""The DAG plans at every scale, lints clean, and rejects bad config before any job runs."""
import json
import re
from pathlib import Path

import pytest
import yaml

from methods.core import registry

from .conftest import ROOT, bad_scale_edit, config_error, copy_scales, job_counts, snakemake


def enabled_papers() -> list[str]:
    """The papers config/config.yaml enables, in report order (`all`: every registered one)."""
    papers = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["papers"]
    return registry.check_papers(papers, registry.papers(ROOT))


@pytest.mark.parametrize("scale,n_pretrain", [("smoke", 4), ("tiny", 12), ("paper", 6)])
def test_dry_run_every_scale(scale, n_pretrain, tmp_path):
    out = snakemake("-n", "--quiet", "rules", config={"scale": scale, "results_dir": tmp_path / "r",
                                                       "reports_dir": tmp_path / "p"})
    counts = job_counts(out.stdout)
    # λ grid × seeds bases; one fine-tune per base × task × LR; one claims + report per scale
    assert counts["wd_plasticity_pretrain"] == n_pretrain
    assert counts["wd_plasticity_probes"] == counts["wd_plasticity_evaluate"] == n_pretrain
    assert counts["wd_plasticity_finetune"] == n_pretrain * 2  # one per base × task (the LR grid runs inside)
    assert counts["claims"] == len(enabled_papers())  # one claims table per enabled paper
    assert counts["claims_table"] == len(enabled_papers())  # its page for `snakemake --report`
    assert counts["report"] == counts["all"] == 1


def test_lint_is_clean():
    out = snakemake("--lint")
    assert "Congratulations, your workflow is in a good condition" in out.stdout + out.stderr


def test_python_lint_is_clean():
    """`make lint`'s second half: ruff (pyflakes, import order, the complexity cap of
    pyproject.toml) finds nothing in the repository."""
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed (it is pinned in pyproject.toml)"
    out = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]


@pytest.mark.parametrize("override,key", [
    ({"scale": "huge"}, "'scale'"),
    ({"papers": "[nosuchpaper]"}, "'papers.0'"),
    ({"colour": "red"}, "'colour' was unexpected"),
])
def test_bad_run_config_fails_before_any_job(override, key, tmp_path):
    out = snakemake("-n", config={"results_dir": tmp_path, **override}, check=False)
    assert key in config_error(out)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("edit,key", [
    (("steps: 60,", "steps: many,"), "config key 'wd_plasticity.pretrain.train.steps': expected int, got 'many'"),
    (("eval_batches: 2", "eval_batchez: 2"), "unknown config key 'siamesenorm.run.eval_batchez'"),
    (("lrs: [1.0e-3, 3.0e-3]", "lrs: []"), "'wd_plasticity.finetune.lrs'"),
    (("steps: 60, batch_size: 16, lr: 3.0e-3, optimizer: adamw", "steps: 60, batch_size: 16, lr: 3.0e-3, optimizer: lion"),
     "'wd_plasticity.pretrain.train.optimizer'"),
])
def test_bad_scale_file_names_the_key(edit, key, tmp_path):
    assert key in bad_scale_edit(tmp_path, *edit)


# Where the paper scale's key tree differs from smoke/tiny, by design: the paper path replaces a
# model the tiny scale trains by a hub model (the tiny model's keys are absent at paper scale), or
# configures a hub-only step (its keys are absent below paper scale). Each paper's config classes
# check these per mode (a tiny-only key at paper scale, or the reverse, is a one-line error).
PAPER_ONLY = {
    "dibjudge.train.hub.low_resource": "hub benchmarks' language groups",
    "dibjudge.train.hub.train_pairs": "pairs drawn from the hub preference data",
    "efficient_dlm.eval.lm_eval_limit": "lm-eval on the converted hub model",
    "efficient_dlm.eval.mc_samples": "lm-eval multiple choice by the likelihood bound",
    "fusionroute.cdpo.max_len": "hub chat sequences",
    "fusionroute.eval.lm_eval_limit": "lm-eval on the fused hub experts",
    "fusionroute.router.max_len": "hub chat sequences",
    "memora.qa": "answer generation and the LLM judge on LoCoMo/LongMemEval",
    "rl_sgd.data": "the hub RL dataset",
    "rl_sgd.eval": "held-out hub sets and lm-eval",
    "rl_sgd.grpo.micro_batch": "gradient accumulation for hub models",
    "scope.outcomes.pool.embedder": "retrieval over the released dataset",
    "scope.outcomes.pool.prices": "the released dataset's token costs",
    "scope.predictor.decode": "sampling the released predictor",
    "tsgd.lm_eval": "the lm-eval anchor on the served solver",
    "uniscale.queries.sets": "the benchmark queries through datasets",
}
TINY_ONLY = {  # trained below paper scale; hub models (or the released dataset) at paper scale
    "looks": "sequential seeds of papers that train a model per seed (paper scale: one hub model)",
    "fusionroute.expert.init_seed": "", "fusionroute.expert.model": "", "fusionroute.expert.n_train": "",
    "fusionroute.expert.train": "", "fusionroute.router.model": "",
    "rl_sgd.prompts": "", "rl_sgd.warmstart": "", "rl_sgd.widths": "",
    "scope.outcomes.pool.max_new_tokens": "", "scope.outcomes.pool.price_per_10k": "",
    "scope.outcomes.queries.max_digits": "", "scope.outcomes.queries.max_ops": "",
    "scope.outcomes.queries.n_anchor": "", "scope.outcomes.queries.n_test": "",
    "scope.outcomes.queries.n_train": "", "scope.outcomes.queries.ops": "", "scope.outcomes.queries.rev_max": "",
    "scope.outcomes.queries.rev_min": "", "scope.outcomes.queries.seed": "",
    "scope.predictor.grpo": "", "scope.predictor.model": "", "scope.predictor.sft": "",
}


def test_scale_files_share_their_keys():
    """Presets differ only in numbers: smoke and tiny have the same key tree; paper's differs from
    it only under the declared PAPER_ONLY / TINY_ONLY keys (and each of those is really there)."""
    import yaml

    from .conftest import ROOT

    def keys(node, prefix=""):
        if isinstance(node, dict):
            out = set()
            for k, v in node.items():
                # task names are data (generated T1/T2 vs hub datasets), their fields are keys
                p = f"{prefix}.{k}" if not prefix.endswith(".tasks") else f"{prefix}.*"
                out |= {p} | keys(v, p)
            return out
        return set()

    trees = {s: keys(yaml.safe_load((ROOT / "config" / "scales" / f"{s}.yaml").read_text()))
             for s in ("smoke", "tiny", "paper")}
    assert trees["smoke"] == trees["tiny"]

    def declared(key, table):
        return any(key == f".{k}" or key.startswith(f".{k}.") for k in table)

    paper_only = {k for k in trees["paper"] - trees["tiny"] if not declared(k, PAPER_ONLY)}
    tiny_only = {k for k in trees["tiny"] - trees["paper"] if not declared(k, TINY_ONLY)}
    assert not paper_only and not tiny_only, (paper_only, tiny_only)
    assert {f".{k}" for k in PAPER_ONLY} <= trees["paper"] - trees["tiny"]
    assert {f".{k}" for k in TINY_ONLY} <= trees["tiny"] - trees["paper"]


def test_envs_match_pins():
    """envs/*.yaml carry exactly pyproject's pins (regenerate with `make envs`)."""
    import tomllib

    from .conftest import ROOT

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for env in ("cpu", "cuda"):
        pinned = re.findall(r'^    - "(.+)"$', (ROOT / "envs" / f"{env}.yaml").read_text(), re.M)
        # the CUDA env's torch is the same version with the CUDA build's local label (+cuXYZ)
        assert [re.sub(r"^(torch==[^+]+)\+cu[0-9]+$", r"\1", d) if env == "cuda" else d for d in pinned] == deps, env


def paper_jobs(tmp_path) -> list[dict]:
    """Every job of the paper-scale dry run: rule, resources and shell command."""
    out = snakemake("-n", "-p", config={"scale": "paper", "results_dir": tmp_path / "r",
                                         "reports_dir": tmp_path / "p"})
    return dry_run_jobs(out.stdout)


def dry_run_jobs(stdout: str) -> list[dict]:
    """The jobs of a `snakemake -n -p` output: rule, resources and shell command (jobs of a
    group, e.g. a served model and its consumers, are printed indented)."""
    jobs, job = [], None
    for line in (raw.strip() for raw in stdout.splitlines()):
        if line.startswith(("rule ", "localrule ", "checkpoint ")):
            job = {"rule": line.split()[1].rstrip(":"), "resources": {}, "shell": ""}
            jobs.append(job)
        elif job is not None and line.strip().startswith("resources:"):
            job["resources"] = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].strip().split(", "))
        elif job is not None and line.startswith("Shell command:"):
            job["shell"] = line
    return jobs


def test_step_commands_do_not_depend_on_the_core_count(tmp_path):
    """torch's CPU kernels split reductions by thread count, so a step's numbers depend on how
    many threads it computes with (`TORCH_THREADS` in workflow/rules/common.smk). Snakemake lowers
    a rule's `threads:` to `--cores`; the tiny DAG's commands must still be the same on 1 core as
    on 8, and the steps that reserve 2 cores compute on 2 threads."""
    cfg = {"scale": "tiny", "results_dir": tmp_path / "r", "reports_dir": tmp_path / "p"}
    one, eight = (dry_run_jobs(snakemake("-n", "-p", "--cores", str(c), config=cfg).stdout) for c in (1, 8))
    assert len(one) == len(eight) > 300
    assert sorted(j["shell"] for j in one) == sorted(j["shell"] for j in eight)
    wide = [j for j in eight if j["resources"].get("cpus_per_task") == "2"]
    assert {"rabitqcache_train", "agoq_train", "scope_grpo"} <= {j["rule"] for j in wide}
    assert all(" --threads 2 " in j["shell"] for j in wide)


def test_every_gpu_job_runs_its_model_on_the_gpu(tmp_path):
    """A paper-scale job that asks SLURM for a GPU hands its step the runtime spec that puts
    the model there (`--runtime` with device auto/cuda; tests/core/test_runtime.py checks that
    the core then places the model on CUDA), and a job without a GPU does not ask for one."""
    jobs = paper_jobs(tmp_path)
    gpu_jobs = [j for j in jobs if int(j["resources"].get("gpu", 0)) > 0]
    assert len(gpu_jobs) > 50
    for j in gpu_jobs:
        m = re.search(r"--runtime '(\{.*?\})'", j["shell"])
        assert m, f"{j['rule']} asks for a GPU but passes no --runtime"
        assert json.loads(m.group(1))["device"] in ("auto", "cuda"), j["rule"]
    for j in jobs:
        m = re.search(r"--runtime '(\{.*?\})'", j["shell"])
        if m and json.loads(m.group(1))["device"] != "cpu":
            assert int(j["resources"].get("gpu", 0)) > 0, f"{j['rule']} may use CUDA but asks for no GPU"


def gpu_hour_plan(stdout: str) -> tuple[list[tuple[str, str, float]], dict[str, float], float]:
    """The plan the paper dry run prints after the job list: ([(paper, rule, GPU-hours)] of the
    per-rule table, {paper: GPU-hours}, total)."""
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("GPU-hour plan"))
    per_paper_at = lines.index("GPU-hours per paper", start)
    rules = [(l.split()[0], l.split()[1], float(l.split()[-1])) for l in lines[start + 2:per_paper_at]]
    papers, total = {}, None
    for l in lines[per_paper_at + 2:]:
        name, _jobs, hours = l.split()
        if name == "total":
            total = float(hours)
            break
        papers[name] = float(hours)
    return rules, papers, total


def test_paper_dry_run_prints_the_gpu_hour_plan(tmp_path):
    """After the job list, the paper dry run prints GPU-hours per rule and per paper (a row for
    every enabled paper, then the shared parts of methods/core with GPU jobs: the model pool) and
    their total, summed from the jobs' own resources (gpu x runtime)."""
    out = snakemake("-n", "-p", config={"scale": "paper", "results_dir": tmp_path / "r",
                                         "reports_dir": tmp_path / "p"})
    rules, papers, total = gpu_hour_plan(out.stdout)
    enabled = enabled_papers()
    assert list(papers) == enabled + ["model_pool"]
    assert total == pytest.approx(sum(papers.values()), abs=0.05 * len(papers))
    assert total == pytest.approx(sum(h for _, _, h in rules), abs=0.05 * len(rules))
    for paper in enabled:
        assert papers[paper] == pytest.approx(sum(h for p, _, h in rules if p == paper), abs=0.05 * len(rules))
    jobs = dry_run_jobs(out.stdout)
    from_jobs = sum(int(j["resources"].get("gpu", 0)) * int(j["resources"].get("runtime", 0)) for j in jobs) / 60
    assert total == pytest.approx(from_jobs, abs=0.05 + 1e-6)  # the plan prints hours to 0.1
    assert total > 1000 and papers["tsgd"] == papers["memora"] == 0  # endpoint clients only (memora: hosted LLMs)
    # pse: a client of the open models the DAG serves: only the servers hold GPUs
    assert papers["pse"] > 0 and all(r == "serving_serve" for p, r, h in rules if p == "pse" and h > 0)
    # smoke and tiny are CPU scales: no GPU job, no plan
    tiny = snakemake("-n", config={"scale": "tiny", "results_dir": tmp_path / "r", "reports_dir": tmp_path / "p"})
    assert "GPU-hour plan" not in tiny.stdout


def paper_target_jobs(tmp_path, target: str, edits=()) -> list[dict]:
    """The jobs of a paper-scale dry run of one target, with `edits` (old, new) made to a copy
    of config/scales/paper.yaml."""
    scales = copy_scales(tmp_path / "scales")
    text = (scales / "paper.yaml").read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (scales / "paper.yaml").write_text(text)
    out = snakemake(str(tmp_path / "r" / "paper" / target), "-n", "-p",
                    config={"scale": "paper", "scales_dir": scales, "results_dir": tmp_path / "r"})
    return dry_run_jobs(out.stdout)


def test_gpus_and_memory_grow_with_the_model(tmp_path):
    """RaBitQCache's capture job (the same ~40k-token prompts) asks for more GPUs, host memory
    and time as its hub model grows: 1.7B < 8B < 32B < 70B (weights + KV cache per GPU)."""
    sizes = []
    for i, model in enumerate(["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.3-70B-Instruct"]):
        jobs = paper_target_jobs(tmp_path / str(i), "rabitqcache/capture.npz",
                                 [("hub_id: meta-llama/Llama-3.1-8B-Instruct", f"hub_id: {model}")])
        (res,) = [j["resources"] for j in jobs if j["rule"] == "rabitqcache_capture"]
        sizes.append((int(res["gpu"]), int(res["mem_mb"]), int(res["runtime"])))
    gpus, mem, runtime = zip(*sizes)
    assert gpus == (1, 1, 2, 4)  # 32B: 65.5 GB of weights + 11 GB of KV cache > 72 GB usable
    assert list(mem) == sorted(mem) and mem[0] < mem[2] < mem[3]  # host RAM: >= 32 GB, 1.2 x the bf16 weights
    assert list(runtime) == sorted(runtime)


@pytest.mark.parametrize("world,nodes", [(8, 1), (16, 2)])
def test_agoq_ranks_get_their_gpus(tmp_path, world, nodes):
    """AGoQ's training job asks for one GPU per rank of run.world_size (whole nodes beyond 8)."""
    jobs = paper_target_jobs(tmp_path, "agoq/runs/fp_s0", [("world_size: 8\n", f"world_size: {world}\n")])
    (res,) = [j["resources"] for j in jobs if j["rule"] == "agoq_train"]
    assert (int(res["gpu"]), int(res["nodes"])) == (world, nodes)


def rules_files() -> dict[str, str]:
    """{name: text} of workflow/rules/<name>.smk: every paper's, the model pool's and the shared ones."""
    return {f.stem: f.read_text() for f in (ROOT / "workflow" / "rules").glob("*.smk")}


def test_rule_names_carry_their_papers_slug():
    """Every step of workflow/rules/<slug>.smk is `<slug>_<step>` (the model pool's `model_pool_<step>`);
    only the shared claims and report steps are not; the helpers files define functions only."""
    shared = {"common", "sizes", "claims", "report"}
    files = rules_files()
    assert set(files) - shared == set(registry.papers(ROOT)) | set(registry.core_parts(ROOT))
    for name, text in files.items():
        rules = re.findall(r"^(?:rule|checkpoint) (\w+):", text, re.M)
        if name in shared:
            assert set(rules) <= {"claims", "claims_look", "claims_table", "report"}, name
        else:
            assert rules and all(r.startswith(f"{name}_") for r in rules), (name, rules)
    for f in (ROOT / "workflow" / "rules" / "helpers").glob("*.smk"):
        assert f.stem in files and not re.search(r"^rule ", f.read_text(), re.M), f.name


def test_wildcard_constraints_are_per_rule():
    """Only `scale` and `seed` are constrained workflow-wide (common.smk); every other wildcard's
    constraint belongs to the rule that has it, so include order cannot change which regex a rule gets."""
    for name, text in rules_files().items():
        global_blocks = re.findall(r"^wildcard_constraints:\n((?:    .*\n)+)", text, re.M)
        if name == "common":
            (block,) = global_blocks
            assert sorted(l.split("=")[0].strip() for l in block.splitlines()) == ["scale", "seed"]
        else:
            assert not global_blocks, name


def test_cpu_steps_get_the_scale_resources_under_a_profile(tmp_path):
    """A step without `resources:` of its own gets its scale's CPU values (common.smk's RESOURCES)
    over the SLURM profile's default-resources; `--set-resources` still wins; steps with their own
    values (claims: 1000 MB, 5 min) keep them."""
    target = tmp_path / "r" / "tiny" / "wd_plasticity" / "claims.json"
    out = snakemake(str(target), "-n", "-p", "--profile", "profiles/slurm", "--set-resources",
                    "wd_plasticity_shards:runtime=7", "wd_plasticity_tokenizer:mem_mb=1234",
                    config={"scale": "tiny", "results_dir": tmp_path / "r"})
    res = {j["rule"]: j["resources"] for j in dry_run_jobs(out.stdout)}
    assert (res["wd_plasticity_data"]["mem_mb"], res["wd_plasticity_data"]["runtime"]) == ("3000", "30")
    assert (res["wd_plasticity_shards"]["mem_mb"], res["wd_plasticity_shards"]["runtime"]) == ("3000", "7")
    assert (res["wd_plasticity_tokenizer"]["mem_mb"], res["wd_plasticity_tokenizer"]["runtime"]) == ("1234", "30")
    assert (res["claims"]["mem_mb"], res["claims"]["runtime"]) == ("1000", "5")
    assert res["wd_plasticity_data"]["slurm_partition"] == "debug"  # the profile's other defaults stay
