"""The output roots cannot reach a shell: `results_dir` / `reports_dir` must be plain paths
(config/schema.yaml `$defs/root_dir`), refused in one line before any job otherwise, and every
path placeholder of every rule's command is shell-quoted (`:q`)."""
import json
import string
import subprocess
import sys

import jsonschema
import pytest
import yaml

from .conftest import ROOT, config_error, snakemake_env

SAFE = ["results", "reports", "/tmp/pytest-of-u/pytest-1/test_x0/r", "./out/", "../shared/results", ".",
        "a.b/c-d_e/1"]
HOSTILE = ["rx$(touch X)", "a b", "a;b", "a|b", "a&b", "a`id`", "a'b", 'a"b', "a\nb", "results\n", "a*", "",
           "-rf", "a/-x", "a//b", "a>b", "~/r", "a\\b"]


@pytest.mark.parametrize("root", SAFE + HOSTILE, ids=[repr(r)[:30] for r in SAFE + HOSTILE])
def test_root_pattern(root):
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(
        {"scale": "smoke", "papers": "all", "results_dir": root, "reports_dir": root}))
    assert (not errors) == (root in SAFE), [e.message for e in errors]
    if root in HOSTILE:
        assert {e.absolute_path[0] for e in errors} == {"results_dir", "reports_dir"}


@pytest.mark.parametrize("key,run", [("results_dir", ["-n"]), ("reports_dir", ["-n"]),
                                     ("results_dir", ["--cores", "1"])])
def test_hostile_root_stops_before_any_job(key, run, tmp_path):
    marker = tmp_path / "pwned"
    cmd = [sys.executable, "-m", "snakemake", *run, "--config", "scale=smoke",
           f"{key}={tmp_path}/r$(touch {marker})`touch {marker}`"]
    out = subprocess.run(cmd, cwd=ROOT, env=snakemake_env(), capture_output=True, text=True, timeout=600)
    msg = config_error(out)
    assert f"key '{key}'" in msg and "does not match" in msg, msg
    assert not marker.exists()
    assert not (tmp_path / "r").exists() and "Shell command" not in out.stdout + out.stderr


# Placeholders that are not paths or are argument strings built in Python, quoted word by word
# there (`shell_words` in workflow/rules/common.smk, or shlex.quote in a helper): `:q` would make
# them one word. Any other params placeholder must be quoted.
UNQUOTED_PARAMS = {
    "launch": "python / torchrun ... (common.smk launcher)",
    "extra": "optional flags, built in the rule's helper",
    "models": "--models <quoted paths> or nothing (pid)",
    "lm_eval": "--lm_eval <quoted path> or nothing",
    "shards": "--shards <quoted path> or nothing (dag_moe)",
    "names": "quoted architecture names (dag_moe)",
    "tasks": "quoted task names (wd_plasticity)",
    "texts": "quoted corpus paths (wd_plasticity tokenizer)",
    "papers": "quoted per-paper result directories (report)",
    "methods": "quoted baseline names (lfq quantize)",
    "objectives": "quoted objective names (lfq final)",
    "bases": "quoted baseline model paths (lfq final)",
    "seeds": "quoted predictor seeds (scope route)",
    "looks": "--looks <ints> --look <int> or nothing (claims.smk)",
    "model": "--model <quoted path> or nothing (verbalized_sampling)",
    "eos": "a constant",
    "seq_len": "an int", "seed": "an int", "gpus": "an int", "ready": "a number", "vocab": "an int",
    "beta": "a number",
}
QUOTED_ROOTS = ("input", "output", "log", "wildcards")

DUMP = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(config=%r),
                      snakefile=Path("Snakefile"), workdir=Path("."))
    rules = {r.name: r.shellcmd for r in wf._workflow.rules if r.shellcmd}
print("SHELLS=" + json.dumps(rules))
"""


def test_every_path_placeholder_is_quoted(tmp_path):
    cfg = {"results_dir": str(tmp_path / "r"), "reports_dir": str(tmp_path / "p")}
    out = subprocess.run([sys.executable, "-c", DUMP % cfg], cwd=ROOT, env=snakemake_env(), capture_output=True,
                         text=True, timeout=600)
    line = [x for x in out.stdout.splitlines() if x.startswith("SHELLS=")]
    assert out.returncode == 0 and line, out.stderr[-3000:]
    shells = json.loads(line[0][len("SHELLS="):])
    assert len(shells) > 100  # every paper's steps
    bad = []
    for rule, cmd in shells.items():
        for _, field, spec, _ in string.Formatter().parse(cmd):
            if field is None or spec.endswith("q"):
                continue
            root, _, name = field.partition(".")
            if root in QUOTED_ROOTS or (root == "params" and name.split(".")[0] not in UNQUOTED_PARAMS):
                bad.append(f"{rule}: {{{field}}}")
    assert not bad, "unquoted placeholders (add :q): " + ", ".join(bad)

