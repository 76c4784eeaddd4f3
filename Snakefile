# icml26-repro: one DAG, three scales, one report. See README.md and config/.
from snakemake.utils import min_version

min_version("9.0")


# parsed here first: a YAML error is one line <file>:<line>: <problem> (Snakemake's own loader
# names neither; a --configfile is read by Snakemake's CLI before this file runs)
from pathlib import Path as _Path

from snakemake.exceptions import WorkflowError as _WorkflowError

from methods.core.config import load_yaml as _load_yaml
from methods.core.results import InputError as _InputError

try:
    if _Path("config/config.yaml").is_file():
        _load_yaml("config/config.yaml")
except _InputError as _e:
    raise _WorkflowError(str(_e))


configfile: "config/config.yaml"


# common.smk puts this interpreter's bin first on PATH (see there)
envvars:
    "PATH",


# The papers: every methods/<slug>/ package with its workflow/rules/<slug>.smk (methods/core/registry.py);
# adding one needs no line here. A package without its rules file (or the reverse) stops here, one line.
from methods.core import registry

REGISTERED = registry.papers(workflow.basedir)


# config validation (run config and every scale file) happens first, in common.smk
include: "workflow/rules/common.smk"
# every torch step's GPU job size from its model and workload (before the rules that use them)
include: "workflow/rules/sizes.smk"


# shared parts of methods/core with rules of their own (the model pool), then every registered paper
for _rules in [*registry.core_parts(workflow.basedir), *REGISTERED]:

    include: f"workflow/rules/{_rules}.smk"


include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"


# Every step exists now: each gets the shared conda env and the scale's CPU resources where it
# names none itself (common.smk), so a plain CPU rule needs no threads/resources/conda block.
step_defaults()


rule all:
    default_target: True
    input:
        f"{REPORTS}/{config['scale']}/index.html",


# After a dry run (`snakemake -n`, `make plan`), the GPU-hour plan: the jobs' own resources
# (sized from their models, workflow/rules/common.smk) summed per rule and paper. Snakemake runs
# no onstart/onsuccess handler in a dry run, so this is an exit hook of the main process; it
# prints nothing in a real run, in a cluster job (`--mode remote/subprocess`) or without GPU jobs.
if workflow.is_main_process:
    import atexit

    from methods.core.plan import print_after_dry_run

    atexit.register(print_after_dry_run, workflow, PAPERS, config["scale"])
