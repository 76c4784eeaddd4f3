# Shared helpers: config loading and validation, `hp`, `as_json`, `code`, `fmt`, the runtime
# spec, resources and GPU job sizing, the training launcher, and the defaults every step shares
# (`step_defaults`). Every output path has the scale as a wildcard, so one DAG can hold several
# scales; hyper-parameters come from config/scales/<scale>.yaml via `hp`. A paper's own helpers
# and GPU job sizers are in workflow/rules/helpers/<slug>.smk, which its rules file includes.
import json
import os
import shlex
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from methods.core import registry
from methods.core.config import check_scale, load_yaml
from methods.core.results import InputError


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


# A wrong key or type in the run config or in any scale file fails here, before any job. A scale
# file's sections are declared as dataclasses: the runtime (methods/core/runtime.py), the model
# pool (methods/core/model_pool/config.py) and each registered paper (methods/<slug>/config.py);
# `python -m methods.core schema` prints the JSON schema generated from them.
check_config(config, "config/schema.yaml", "config/config.yaml or --config")
SCALES = {}
for _scale in ("smoke", "tiny", "paper"):
    _path = f"{config['scales_dir']}/{_scale}.yaml"
    try:  # a YAML error: one line <file>:<line>: <problem>
        SCALES[_scale] = load_yaml(_path)
        check_scale(SCALES[_scale], REGISTERED, _path, root=workflow.basedir)
    except InputError as _e:
        raise WorkflowError(str(_e))


# Rules run `python -m methods...`: make that the interpreter running Snakemake (the venv's),
# also inside SLURM jobs, which re-run this file with the same interpreter.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
# the papers the default target (all) builds and the report shows, in report order: `papers: all` = every
# registered one (REGISTERED, from methods/core/registry.py in the Snakefile), or the run config's list
try:
    PAPERS = registry.check_papers(config["papers"], REGISTERED)
except InputError as _e:
    raise WorkflowError(str(_e))
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
    of paths relative to the repository root. Kept in .snakemake/code-inputs.json until a source
    file changes."""
    files, found = codeinputs.cached_step(entry, step, root=workflow.basedir)
    if not found:
        logger.warning(
            f"code({entry!r}, {step!r}): no such sub-command found in methods/{entry}/__main__.py; "
            "listing everything it imports"
        )
    return files


def conda_env(wildcards):
    """The conda env matching the pins (used with --software-deployment-method conda):
    the CUDA build of torch where a step gets a GPU."""
    return "../../envs/cuda.yaml" if on_gpu(wildcards.scale) else "../../envs/cpu.yaml"


def shell_words(words):
    """Paths (or names) as one string of shell-quoted words: a `params:` argument string built in
    Python (`--models a.pt b.pt`), which `:q` in the command cannot quote word by word; a path
    placeholder of a command itself is quoted with `:q` (tests/workflow/test_shell_safety.py)."""
    if isinstance(words, (str, os.PathLike)):
        words = [words]
    return " ".join(shlex.quote(str(w)) for w in words)


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
    """A CPU step's resource as a function of the job's scale."""
    return lambda wc: RESOURCES[wc.scale][key]


# ---- what every step shares, from one place ---------------------------------------------------
# Every step runs `threads: 1` (Snakemake's default where a step names none) in the conda env of
# its scale (`conda_env`); one that names no `resources:` of its own (data preparation,
# aggregation, figures, HTTP clients of LLM endpoints: the CPU steps) gets the scale's CPU values
# (RESOURCES: mem_mb, runtime). Torch steps size themselves (`resources: **sized(...)`), a few
# small steps name theirs. The values are the rules' own, so they hold with or without a profile
# (`snakemake --cores N`) and beat a profile's `default-resources` (profiles/slurm gets the per-scale
# mem/runtime), while `--set-resources` / a profile's `set-resources:` still win.
def step_defaults():
    """Give every step defined so far what it does not name itself: the conda env and the CPU
    resources. Called by the Snakefile once all rules files are read."""
    from snakemake.resources import Resources

    cpu = {k: res(k) for k in ("mem_mb", "runtime")}
    for step in workflow.rules:
        if step.shellcmd is None:  # a target without a command (all)
            continue
        if step.conda_env is None:
            step.conda_env = conda_env
        if step.ruleinfo.resources is None:
            step.resources.update(Resources.from_mapping(cpu))
            # the command line's (or profile's) per-step values stay on top, as Snakemake applies them
            chosen = workflow.resource_settings.overwrite_resources.get(step.name) or {}
            step.resources.update(Resources.from_mapping(chosen))


# ---- torch's thread count is part of a step's numbers -----------------------------------------
# torch's CPU kernels split their reductions (matmuls, norms) by the intra-op thread count, so one
# step with one seed computes other last bits on 1 thread than on 2, and a long training run grows
# them into another model: rabitqcache's tiny model trained on 1 and on 2 threads scores C6c 1.0
# and 0.86. Snakemake lowers a rule's `threads:` to `--cores` where fewer exist, so a step that
# computes on more than one thread takes its count from here, not from `{threads}`: `threads:
# TORCH_THREADS` (what the scheduler reserves) and `--threads {params.torch_threads}` with
# `params: torch_threads=TORCH_THREADS`. Its numbers are then the same with `--cores 1` (where it
# shares the one core) as with `--cores 16`. Steps on one thread pass `{threads}`, which is 1.
TORCH_THREADS = 2


# ---- GPU jobs: resources from the model and the workload (methods/core/resources.py) ----------
# A torch step has `resources: **sized(<name>_job)` and `params: runtime=runtime_of(<name>_job)`;
# <name>_job(wc) (one per step, named after it, in its paper's workflow/rules/helpers/<slug>.smk;
# shared parts in workflow/rules/sizes.smk) returns the R.Job of its model and workload, or None
# where the job needs no GPU (a pointer to a hub id, an HTTP client). Scales
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
                return {
                    "mem_mb": cpu["mem_mb"],
                    "runtime": cpu["runtime"],
                    "gpu": 0,
                    "nodes": 1,
                    "cpus_per_task": threads,
                }[key]
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
    - gpu = G > 1 on one node: `python -m methods.core.distributed --nproc-per-node G`, G ranks
      of this host that meet through a file store in a private directory (no port opened; torchrun
      --standalone keeps TCP stores listening on every interface); methods/core/distributed.py
      binds rank r to GPU r and train() runs the runtime's `distributed` strategy (ddp|fsdp);
    - nodes = N > 1: `srun --nodes N --ntasks-per-node 1 ... torchrun-slurm.sh G/N`, one torchrun
      per node that meets the others at a c10d rendezvous on the job's first node, found as
      `scontrol show hostnames $SLURM_JOB_NODELIST | head -1` inside the srun task (the SLURM
      plugin's job shell does not keep SLURM_JOB_NODELIST). Such a rule also needs the
      resources `mpi` (so the plugin runs the job shell as is instead of inside `srun -n1`) and
      `tasks` = N: see profiles/slurm/config.yaml."""
    gpus = int(resources.get("gpu", 0) or 0)
    nodes = int(resources.get("nodes", 1) or 1)
    if nodes <= 1:
        return "python" if gpus <= 1 else f"python -m methods.core.distributed --nproc-per-node {gpus}"
    if gpus % nodes:
        raise WorkflowError(f"resources: gpu={gpus} is not a multiple of nodes={nodes} (GPUs per node must be equal)")
    if not resources.get("mpi"):
        raise WorkflowError(f"resources: nodes={nodes} needs mpi='srun' and tasks={nodes} (profiles/slurm/config.yaml)")
    return (
        f"RDZV_PORT={RDZV_PORT} srun --nodes {nodes} --ntasks-per-node 1 --gpus-per-task {gpus // nodes} "
        f"--cpus-per-task {threads} bash workflow/scripts/torchrun-slurm.sh {gpus // nodes}"
    )
