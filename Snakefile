# icml26-repro: one DAG, three scales, one report. See README.md and config/.
import yaml
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


# A wrong key or type in the run config or in any scale file fails here, before any job.
validate(config, "config/schema.yaml")
SCALES = {}
for _scale in ("smoke", "tiny", "paper"):
    with open(f"config/scales/{_scale}.yaml") as _f:
        SCALES[_scale] = yaml.safe_load(_f)
    validate(SCALES[_scale], "config/scale.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/wd_plasticity.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        f"{REPORTS}/{config['scale']}/index.html",
