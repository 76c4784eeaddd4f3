# Shared helpers and steps. Every output path has the scale as a wildcard, so one DAG can
# hold several scales; hyper-parameters come from config/scales/<scale>.yaml via `hp`.
import json
import os
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate


def check_config(obj, schema, where):
    """Validate with snakemake.utils.validate (which also fills defaults); on failure, one
    line that names the file and the dotted key, instead of a dump of the whole schema."""
    import jsonschema

    with open(schema) as f:
        errors = list(jsonschema.Draft202012Validator(yaml.safe_load(f)).iter_errors(obj))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        key = ".".join(map(str, e.absolute_path)) or "(top level)"
        raise WorkflowError(f"invalid config in {where}: key '{key}': {e.message}")
    # snakemake resolves a relative schema path against this .smk file's directory
    validate(obj, str(Path(schema).resolve()))


# A wrong key or type in the run config or in any scale file fails here, before any job.
check_config(config, "config/schema.yaml", "config/config.yaml or --config")
SCALES = {}
for _scale in ("smoke", "tiny", "paper"):
    _path = f"{config['scales_dir']}/{_scale}.yaml"
    try:
        with open(_path) as _f:
            SCALES[_scale] = yaml.safe_load(_f)
    except (OSError, yaml.YAMLError) as _e:
        raise WorkflowError(f"cannot read scale config {_path}: {_e}")
    check_config(SCALES[_scale], "config/scale.schema.yaml", _path)


# Rules run `python -m methods...`: make that the interpreter running Snakemake (the venv's),
# also inside SLURM jobs, which re-run this file with the same interpreter.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
PAPERS = config["papers"]
FIGURES = {}  # paper → (scale → its figure paths); filled by each paper's .smk


wildcard_constraints:
    scale="smoke|tiny|paper",
    seed=r"\d+",


def hp(scale, paper, *keys):
    """A paper's hyper-parameters at a scale, optionally a nested section."""
    node = SCALES[scale][paper]
    for k in keys:
        node = node[k]
    return node


def as_json(obj):
    """A config section as the JSON string a step's `--config` takes (and a param compares)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# Code inputs (a code change reruns the steps it affects): computed from the step's entry point with `ast` (no imports
# run, no torch), so a rule can no longer miss a module its step imports.
from methods.core import codeinputs


def code(entry, step=None):
    """The source files a step can import, as inputs, so editing one reruns that step and what
    depends on it (Snakemake does not track imports). `entry` and `step` are the words of the
    rule's command: `python -m methods.lfq quantize` → code("lfq", "quantize");
    `python -m methods.core claims` → code("core", "claims"); a module run as a script,
    `python -m methods.core.report` → code("core.report"). The files: its __main__ and
    packages, what __main__ imports at module level and in the sub-command's function, then
    everything those modules import, transitively (methods/core/codeinputs.py); a sorted list
    of paths relative to the repository root."""
    if step is not None and not codeinputs.resolves(entry, step, root=workflow.basedir):
        logger.warning(f"code({entry!r}, {step!r}): no such sub-command found in methods/{entry}/__main__.py; "
                       "listing everything it imports")
    return codeinputs.step_files(entry, step, root=workflow.basedir)


def conda_env(wildcards):
    """The conda env matching the pins (used with --software-deployment-method conda):
    the CUDA build of torch where a step gets a GPU."""
    return "../../envs/cuda.yaml" if on_gpu(wildcards.scale) else "../../envs/cpu.yaml"


def fmt(x):
    """A number as it appears in paths: 0.0 → 0, 0.1 → 0.1, 0.001 → 0.001."""
    return f"{x:g}"


# Per-step resources by scale (operations, not science: they never change a number) of the
# CPU jobs: data preparation, aggregation, figures, claims, HTTP clients of LLM endpoints, and
# every step at a scale whose runtime device is cpu. runtime in minutes. GPU jobs size
# themselves from their model and workload (`sized`, below).
RESOURCES = {
    "smoke": {"mem_mb": 2000, "runtime": 10, "gpu": 0},
    "tiny": {"mem_mb": 3000, "runtime": 30, "gpu": 0},
    "paper": {"mem_mb": 64000, "runtime": 2880, "gpu": 0},
}


def runtime_spec(wc):
    """The scale's runtime spec (device, dtype policy, compile) as the `--runtime` JSON every
    torch step takes (methods/core/runtime.py)."""
    return as_json(SCALES[wc.scale]["runtime"])


def cpu_runtime(wc):
    """The runtime spec of a torch step that asks for no GPU: the scale's, pinned to CPU/fp32."""
    return as_json({**SCALES[wc.scale]["runtime"], "device": "cpu", "dtype": "fp32"})


def res(key):
    """A CPU rule's resource as a function of the job's scale."""
    return lambda wc: RESOURCES[wc.scale][key]


# ---- GPU jobs: resources from the model and the workload (methods/core/resources.py) ----------
# A torch step has `resources: **sized(<name>_job)` and `params: runtime=runtime_of(<name>_job)`;
# <name>_job(wc) (workflow/rules/sizes.smk, one per step) returns the R.Job of its model and
# workload, or None where the job needs no GPU (a pointer to a hub id, an HTTP client). Scales
# whose runtime device is cpu keep RESOURCES and gpu 0. The paper dry run sums the same
# resources into its GPU-hour plan (methods/core/plan.py, the end of the Snakefile).
from methods.core import resources as R  # no torch

HUB_MODELS = R.load_hub_models("config/hub_models.yaml")
_JOBS, _NOTED = {}, set()


def on_gpu(scale):
    return SCALES[scale]["runtime"]["device"] != "cpu"


def hub_spec(model_id):
    """config/hub_models.yaml, or the config.json of a local model directory (stand-ins)."""
    return R.model_spec(HUB_MODELS, model_id)


def ddp_replicas(scale):
    """A data-parallel step's strategy (runtime.distributed): ddp keeps a full replica of the
    weights and optimizer state on every GPU, fsdp shards them."""
    return SCALES[scale]["runtime"].get("distributed", "ddp") == "ddp"


def job_size(sizer, wc):
    """sizer(wc), once per job; its notes (a GPU over-full, a job past the target time) as
    warnings, once each."""
    key = (sizer, tuple(sorted(wc.items())))
    if key not in _JOBS:
        _JOBS[key] = job = sizer(wc)
        for note in (job.notes if job else ()):
            if note not in _NOTED:
                _NOTED.add(note)
                logger.warning(f"GPU sizing: {note}")
    return _JOBS[key]


def sized(sizer):
    """The resources of a torch step (mem_mb, runtime, gpu, nodes, cpus_per_task): sizer's R.Job
    at a GPU scale, else the scale's CPU values with gpu 0 (profiles/slurm/config.yaml maps
    them to sbatch)."""

    def resource(key):
        def get(wc, threads):
            job = job_size(sizer, wc) if on_gpu(wc.scale) else None
            if job is None:
                cpu = RESOURCES[wc.scale]
                return {"mem_mb": cpu["mem_mb"], "runtime": cpu["runtime"], "gpu": 0, "nodes": 1,
                        "cpus_per_task": threads}[key]
            return job.resources(threads)[key]

        return get

    return {k: resource(k) for k in R.RESOURCE_KEYS}


def runtime_of(sizer):
    """The `--runtime` of a torch step: the scale's spec, pinned to CPU where its job gets no GPU."""

    def get(wc):
        if on_gpu(wc.scale) and job_size(sizer, wc) is None:
            return cpu_runtime(wc)
        return runtime_spec(wc)

    return get


# Port of the c10d rendezvous on a multi-node job's first node (workflow/scripts/torchrun-slurm.sh).
RDZV_PORT = 29500


def launcher(wildcards, threads, resources):
    """The words that start a training step, in place of `python` before `-m methods.<slug>`:
    a `params:` function (`launch=launcher`, shell `{params.launch} -m methods...`). It reads
    the job's `resources.gpu` (GPUs of the job, all nodes together) and `resources.nodes`
    (default 1):
    - gpu <= 1: `python`, one process on the runtime's device (CPU or the job's GPU);
    - gpu = G > 1 on one node: `torchrun --standalone --nproc-per-node G`, G workers of this
      host (rendezvous on localhost, on a free port torchrun picks); methods/core/distributed.py
      binds worker r to GPU r and train() runs the runtime's `distributed` strategy (ddp|fsdp);
    - nodes = N > 1: `srun --nodes N --ntasks-per-node 1 ... torchrun-slurm.sh G/N`, one torchrun
      per node that meets the others at a c10d rendezvous on the job's first node, found as
      `scontrol show hostnames $SLURM_JOB_NODELIST | head -1` inside the srun task (the SLURM
      plugin's job shell does not keep SLURM_JOB_NODELIST). Such a rule also needs the
      resources `mpi` (so the plugin runs the job shell as is instead of inside `srun -n1`) and
      `tasks` = N: see profiles/slurm/config.yaml."""
    gpus = int(resources.get("gpu", 0) or 0)
    nodes = int(resources.get("nodes", 1) or 1)
    if nodes <= 1:
        return "python" if gpus <= 1 else f"torchrun --standalone --nproc-per-node {gpus}"
    if gpus % nodes:
        raise WorkflowError(f"resources: gpu={gpus} is not a multiple of nodes={nodes} (GPUs per node must be equal)")
    if not resources.get("mpi"):
        raise WorkflowError(f"resources: nodes={nodes} needs mpi='srun' and tasks={nodes} (profiles/slurm/config.yaml)")
    return (f"RDZV_PORT={RDZV_PORT} srun --nodes {nodes} --ntasks-per-node 1 --gpus-per-task {gpus // nodes} "
            f"--cpus-per-task {threads} bash workflow/scripts/torchrun-slurm.sh {gpus // nodes}")


# ---- siamesenorm (workflow/rules/siamesenorm.smk) ----
def sn(scale, *keys):
    return hp(scale, "siamesenorm", *keys)


def sn_runs(scale):
    """Every (scheme, lr, seed) run directory of the sweep."""
    return [f"{RESULTS}/{scale}/siamesenorm/runs/{s}_lr{fmt(lr)}_s{seed}"
            for s in sn(scale, "schemes") for lr in sn(scale, "lrs") for seed in sn(scale, "seeds")]


def sn_steptime_cfg(scale):
    """The step-time section plus the sweep's model, batch shape and schemes."""
    run = sn(scale, "run")
    return {**sn(scale, "steptime"), "model": run["model"], "schemes": sn(scale, "schemes"),
            "batch_size": run["train"]["batch_size"], "seq_len": run["seq_len"]}


# ---- wd_plasticity (workflow/rules/wd_plasticity.smk) ----
def wdp(scale, *keys):
    return hp(scale, "wd_plasticity", *keys)


def wdp_tasks(scale):
    return sorted(wdp(scale, "world", "tasks"))


def wdp_runs(scale):
    """(λ, seed) of every base, as they appear in paths."""
    return [(fmt(w), s) for w in wdp(scale, "weight_decays") for s in wdp(scale, "seeds")]


def wdp_ft(wc, kind):
    """The fine-tuned model dirs (kind="model") or metrics (kind="metrics") of one base, in
    the order of `wdp_tasks`."""
    base = f"{RESULTS}/{wc.scale}/wd_plasticity/ft/wd{wc.wd}_s{wc.seed}"
    ext = "" if kind == "model" else ".json"
    return [f"{base}/{t}{ext}" for t in wdp_tasks(wc.scale)]


def wdp_all(scale, what):
    pattern = {
        "base": f"{RESULTS}/{scale}/wd_plasticity/base/wd{{}}_s{{}}",
        "probes": f"{RESULTS}/{scale}/wd_plasticity/probes/wd{{}}_s{{}}.json",
        "eval": f"{RESULTS}/{scale}/wd_plasticity/eval/wd{{}}_s{{}}.json",
    }[what]
    return [pattern.format(w, s) for w, s in wdp_runs(scale)]


# ---- dag_moe (workflow/rules/dag_moe.smk) ----
def dm(scale, *keys):
    return hp(scale, "dag_moe", *keys)


def dm_archs(scale):
    return sorted(dm(scale, "archs"))


def dm_step_cfg(scale, section):
    """The `lm` or `compose` section plus the MoE knobs every architecture shares."""
    return {**dm(scale, section), "moe": dm(scale, "moe")}


def dm_runs(scale, what, first_seed_only=False):
    """Every (arch, seed) LM run's model dir (what="model") or metrics (what="metrics"),
    archs sorted; with first_seed_only, one run per arch (the timing step's models)."""
    seeds = dm(scale, "seeds")[:1] if first_seed_only else dm(scale, "seeds")
    ext = "" if what == "model" else ".json"
    return [f"{RESULTS}/{scale}/dag_moe/runs/{a}/s{s}{ext}" for a in dm_archs(scale) for s in seeds]


def dm_lm_eval(scale):
    """Paper scale: one zero-shot lm-eval file per LM run; none where `eval_tasks` is empty."""
    if not dm(scale, "downstream", "eval_tasks"):
        return []
    return [f"{RESULTS}/{scale}/dag_moe/lm_eval/{a}_s{s}.json" for a in dm_archs(scale) for s in dm(scale, "seeds")]


# ---- lfq (workflow/rules/lfq.smk) ----
def lq(scale, *keys):
    return hp(scale, "lfq", *keys)


def lq_name(setting):
    """A quantization setting as it appears in paths: bits 3, group 32 → w3g32."""
    return f"w{setting['bits']}g{setting['group_size']}"


def lq_settings(scale):
    return [lq_name(s) for s in lq(scale, "settings")]


def lq_quant_cfg(scale, name):
    """The `quant` section plus the bits and group size of setting `name`."""
    (s,) = [s for s in lq(scale, "settings") if lq_name(s) == name]
    return {**lq(scale, "quant"), "bits": s["bits"], "group_size": s["group_size"]}


def lq_models(scale, name):
    """Every quantized model directory of one setting, in the order of `variants`."""
    return [f"{RESULTS}/{scale}/lfq/models/{v}-{name}" for v in lq(scale, "variants")]


# ---- agoq (workflow/rules/agoq.smk) ----
def ag(scale, *keys):
    return hp(scale, "agoq", *keys)


def ag_run_cfg(scale, name):
    """The run section plus the variant (bit policy, all-reduce) named `name`."""
    found = [v for v in ag(scale, "variants") if v["name"] == name]
    if not found:
        raise WorkflowError(f"agoq: train_variants names {name!r}, which is not in agoq.variants")
    return {**ag(scale, "run"), "variant": found[0]}


def ag_probe_cfg(scale):
    """The probe section plus every variant's bit policy (their bytes are measured there)."""
    return {**ag(scale, "probe"), "variants": ag(scale, "variants")}


def ag_runs(scale):
    return [f"{RESULTS}/{scale}/agoq/runs/{v}" for v in ag(scale, "train_variants")]


# ---- asag (workflow/rules/asag.smk) ----
def asag(scale, *keys):
    return hp(scale, "asag", *keys)


def asag_runs(scale):
    return [f"{RESULTS}/{scale}/asag/runs/{p['name']}.jsonl" for p in asag(scale, "decode", "policies")]


# ---- remoe (workflow/rules/remoe.smk) ----
def rm(scale, *keys):
    return hp(scale, "remoe", *keys)


def rm_ft_cfg(scale, name):
    """The finetune section plus the variant (loss switches) named `name`."""
    found = [v for v in rm(scale, "variants") if v["name"] == name]
    if not found:
        raise WorkflowError(f"remoe: no variant named {name!r} in remoe.variants")
    return {**rm(scale, "finetune"), "variant": found[0]}


def rm_ckpts(scale):
    """The pre-trained checkpoint and one gate-only fine-tune per variant."""
    names = [v["name"] for v in rm(scale, "variants")]
    if "base" in names or len(set(names)) != len(names):
        raise WorkflowError("remoe.variants: names must be unique and not 'base'")
    return [f"{RESULTS}/{scale}/remoe/ckpt/base.pt"] + [
        f"{RESULTS}/{scale}/remoe/ckpt/finetuned/{n}.pt" for n in names]


# ---- rabitqcache (workflow/rules/rabitqcache.smk) ----
def rq(scale, *keys):
    return hp(scale, "rabitqcache", *keys)


def rq_estimator_cfg(scale):
    """The estimator section plus the region boundaries of the method (skipped layers, I)."""
    m = rq(scale, "method")
    return {**rq(scale, "estimator"), "min_layer": m["skip_layers"], "interval": m["quantize_interval"]}


def rq_lm_eval_cfg(scale):
    """lm-eval section: tasks etc. plus the method settings with its own Top-p."""
    lm = rq(scale, "lm_eval")
    return {"method": {**rq(scale, "method"), "top_p": lm["top_p"]}, "tasks": lm["tasks"],
            "limit": lm["limit"], "batch_size": lm["batch_size"], "metadata": lm["metadata"]}


def rq_lm_eval(scale):
    """Paper scale: one lm-eval file; none where `lm_eval.tasks` is empty."""
    return [f"{RESULTS}/{scale}/rabitqcache/lm_eval.json"] if rq(scale, "lm_eval", "tasks") else []


# ---- rl_sgd (workflow/rules/rl_sgd.smk) ----
def rs(scale, *keys):
    return hp(scale, "rl_sgd", *keys)


def rs_run_keys(scale):
    """(width, optimizer, lr, seed) of every GRPO run: the AdamW and SGD grids at every width
    (all seeds at the widest, the first seed elsewhere) and the ablations at the widest."""
    widths, seeds = sorted(rs(scale, "widths")), rs(scale, "seeds")
    keys = [(w, o, lr, s) for w in widths for o in ("adamw", "sgd") for lr in rs(scale, "grid", o)
            for s in (seeds if w == widths[-1] else seeds[:1])]
    keys += [(widths[-1], o, lr, seeds[0]) for o, lr in sorted(rs(scale, "ablation").items())]
    return keys


def rs_runs(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/runs/d{w}_{o}_lr{fmt(lr)}_s{s}" for w, o, lr, s in rs_run_keys(scale)]


def rs_bases(scale):
    return [f"{RESULTS}/{scale}/rl_sgd/base/d{w}" for w in sorted(rs(scale, "widths"))]


def rs_warm_cfg(scale):
    return {**rs(scale, "warmstart"), "widths": rs(scale, "widths")}


def rs_analysis_cfg(scale):
    return {**rs(scale, "analysis"), "widths": rs(scale, "widths"), "grid": rs(scale, "grid"),
            "ablation": rs(scale, "ablation")}


# ---- efficient_dlm (workflow/rules/efficient_dlm.smk) ----
def edlm(scale, *keys):
    return hp(scale, "efficient_dlm", *keys)


def edlm_convs(scale):
    """The converted model dir of every attention/masking variant at a scale."""
    return [f"{RESULTS}/{scale}/efficient_dlm/models/{v}" for v in edlm(scale, "variants")]


# ---- dibjudge (workflow/rules/dibjudge.smk) ----
def dj(scale, *keys):
    return hp(scale, "dibjudge", *keys)


def dj_metrics(scale):
    """metrics_<variant>.json of every judge variant."""
    return [f"{RESULTS}/{scale}/dibjudge/metrics_{v}.json" for v in dj(scale, "variants")]


# ---- verbalized_sampling (workflow/rules/verbalized_sampling.smk) ----
def vs(scale, *keys):
    return hp(scale, "verbalized_sampling", *keys)


def vs_sample_cfg(scale, vsmodel):
    """The sample step's config for one model: `generator` = that model's spec from
    `sample.generators` (backend null = the DAG's tiny LM)."""
    cfg = dict(vs(scale, "sample"))
    cfg["generator"] = cfg.pop("generators")[vsmodel]
    return cfg


# ---- pid (workflow/rules/pid.smk) ----
def pid(scale, *keys):
    return hp(scale, "pid", *keys)


def pid_models(scale):
    """One model file per VL mixture weighting, plus the omni (tri-modal) model."""
    return [f"{RESULTS}/{scale}/pid/models/{m}.pt" for m in [*sorted(pid(scale, "train", "mixes")), "omni"]]


def pid_data_cfg(scale):
    return {**pid(scale, "data"), "hub": pid(scale, "hub")}


def pid_reweight_cfg(scale):
    return {k: pid(scale, k) for k in ("train", "pid", "reweight")}


# ---- uniscale + model_pool (workflow/rules/uniscale.smk) ----
def us(scale, *keys):
    return hp(scale, "uniscale", *keys)


def pool_members(scale):
    """Every policy member directory of the shared model pool."""
    return [f"{RESULTS}/{scale}/model_pool/members/{m['name']}" for m in us(scale, "pool", "members")]


# ---- pse (workflow/rules/pse.smk) ----
def pse(scale, *keys):
    return hp(scale, "pse", *keys)


def pse_agent_cfg(scale, name):
    """One agent's {name, spec} (spec: the SimAgent's planted parameters or a make_llm spec)."""
    return next(a for a in pse(scale, "agents") if a["name"] == name)


def pse_primary_cfg(scale):
    return pse_agent_cfg(scale, pse(scale, "primary"))


def pse_runs(scale):
    return [f"{RESULTS}/{scale}/pse/transcripts/runs/{a['name']}.jsonl" for a in pse(scale, "agents")]


def pse_defences(scale):
    return [f"{RESULTS}/{scale}/pse/transcripts/def_{d}.jsonl" for d in ("none", "selfverify", "keyword")]


def pse_metrics_cfg(scale):
    """The metrics step's config; `planted` = the primary SimAgent's parameters (null for real models)."""
    spec = pse_primary_cfg(scale)["spec"]
    planted = {k: v for k, v in spec.items() if k != "backend"} if spec.get("backend") == "sim" else None
    return {"analysis": pse(scale, "analysis"), "judge": pse(scale, "judge"),
            "primary": pse(scale, "primary"), "planted": planted}


# ---- memora (workflow/rules/memora.smk) ----
def mem(scale, *keys):
    return hp(scale, "memora", *keys)


def mem_runs(scale):
    """The retrieval-run files, one per "store:policy" of the scale's `runs`."""
    return [f"{RESULTS}/{scale}/memora/ret/{r.replace(':', '/')}.jsonl" for r in mem(scale, "runs")]


def mem_builds(scale):
    """The store files the runs need (each built once)."""
    stores = sorted({r.split(":")[0] for r in mem(scale, "runs")})
    return [f"{RESULTS}/{scale}/memora/stores/{s}.json" for s in stores]


# ---- tsgd (workflow/rules/tsgd.smk) ----
def tsgd_cfg(scale):
    return hp(scale, "tsgd")


def tsgd_outputs(scale, kind, ext):
    """One file per TSGD variant (libs/*.json or traces/*.csv), in the config's order."""
    return [f"{RESULTS}/{scale}/tsgd/{kind}/{v}.{ext}" for v in tsgd_cfg(scale)["variants"]]


# ---- scope (workflow/rules/scope.smk) ----
def sc(scale, *keys):
    return hp(scale, "scope", *keys)


def sc_member_dirs(scale):
    """The routing pool of SCOPE, in config order: shared pool members (results/{scale}/model_pool)
    and SCOPE's own extra members (results/{scale}/scope/members)."""
    own = {m["name"] for m in sc(scale, "extra_members")}
    return [f"{RESULTS}/{scale}/scope/members/{m}" if m in own else f"{RESULTS}/{scale}/model_pool/members/{m}"
            for m in sc(scale, "outcomes", "pool", "members")]


# ---- fusionroute (workflow/rules/fusionroute.smk) ----
def fr(scale, *keys):
    return hp(scale, "fusionroute", *keys)


def fr_cfg(scale, section, **extra):
    """A step's section of the fusionroute config with the `hub` section beside it."""
    return {**fr(scale, section), "hub": fr(scale, "hub"), **extra}


def fr_experts(scale):
    """The expert directories in the order of the routing head (add, rev, brk)."""
    return [f"{RESULTS}/{scale}/fusionroute/experts/{k}" for k in ("add", "rev", "brk")]

