# icml26-repro: one DAG, three scales, one report. See README.md and config/.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# common.smk puts this interpreter's bin first on PATH (see there)
envvars:
    "PATH",


# config validation (run config and every scale file) happens first, in common.smk
include: "workflow/rules/common.smk"
# every torch step's GPU job size from its model and workload (before the rules that use them)
include: "workflow/rules/sizes.smk"
include: "workflow/rules/wd_plasticity.smk"
include: "workflow/rules/siamesenorm.smk"
include: "workflow/rules/dag_moe.smk"
include: "workflow/rules/lfq.smk"
include: "workflow/rules/agoq.smk"
include: "workflow/rules/rabitqcache.smk"
include: "workflow/rules/asag.smk"
include: "workflow/rules/remoe.smk"
include: "workflow/rules/efficient_dlm.smk"
include: "workflow/rules/rl_sgd.smk"
include: "workflow/rules/pid.smk"
include: "workflow/rules/dibjudge.smk"
include: "workflow/rules/verbalized_sampling.smk"
include: "workflow/rules/uniscale.smk"
include: "workflow/rules/fusionroute.smk"
include: "workflow/rules/scope.smk"
include: "workflow/rules/tsgd.smk"
include: "workflow/rules/memora.smk"
include: "workflow/rules/pse.smk"
include: "workflow/rules/report.smk"


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
