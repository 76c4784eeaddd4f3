"""Repository files that users and the Snakemake workflow catalog read: the catalog's settings
file, the license, the configuration guide (config/README.md), the conda environments and the
rule files' snakefmt format."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_catalog_file_has_the_catalogs_keys():
    """The format of the catalog's "Adding workflows" page: usage.mandatory-flags {desc, flags}
    and usage.software-stack-deployment with booleans, at least one deployment method true."""
    spec = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    usage = spec["usage"]
    assert set(usage) <= {"mandatory-flags", "software-stack-deployment", "report"}
    flags = usage["mandatory-flags"]
    assert set(flags) == {"desc", "flags"} and isinstance(flags["desc"], str) and flags["desc"].strip()
    assert isinstance(flags["flags"], str) or all(isinstance(f, str) for f in flags["flags"])
    ssd = usage["software-stack-deployment"]
    assert set(ssd) <= {"conda", "apptainer", "apptainer+conda", "singularity", "singularity+conda", "report"}
    assert all(isinstance(v, bool) for v in ssd.values())
    assert any(ssd.get(k) for k in ("conda", "apptainer", "apptainer+conda"))
    # what it claims exists: per-step conda envs and a report
    if ssd.get("conda"):
        assert (ROOT / "envs/cpu.yaml").is_file() and "conda_env" in (ROOT / "workflow/rules/common.smk").read_text()
    # the catalog shows config/README.md as the workflow's configuration page
    assert (ROOT / "config/README.md").is_file()


def test_license_is_mit_with_our_copyright():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the icml26-repro authors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text


def test_config_readme_names_every_run_key_and_scale_section():
    text = (ROOT / "config/README.md").read_text()
    schema = yaml.safe_load((ROOT / "config/schema.yaml").read_text())
    keys = list(schema["properties"])
    assert keys and all(f"`{k}`" in text for k in keys), [k for k in keys if f"`{k}`" not in text]
    # every required key is said to be required, every default is the schema's
    for k in schema["required"]:
        assert re.search(rf"`{k}`[^\n]*required|required[^\n]*`{k}`", text), k
    for k, prop in schema["properties"].items():
        assert f"| `{k}` | `{prop['default']}` |" in text, k
    # the scale files' shared sections (those that are not a paper's) are described too
    from methods.core.registry import papers

    sections = yaml.safe_load((ROOT / "config/scales/tiny.yaml").read_text())
    shared = set(sections) - set(papers(ROOT))
    assert "runtime" in shared
    assert all(f"`{s}`" in text for s in shared), shared
    for scale in ("smoke", "tiny", "paper"):
        assert f"`{scale}`" in text and (ROOT / f"config/scales/{scale}.yaml").is_file()


def _gen_envs():
    spec = importlib.util.spec_from_file_location("gen_envs", ROOT / "scripts/gen_envs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cuda_env_pins_the_cuda_build_of_torch():
    envs = {v: yaml.safe_load((ROOT / f"envs/{v}.yaml").read_text()) for v in ("cpu", "cuda")}
    pip = {v: next(d["pip"] for d in e["dependencies"] if isinstance(d, dict)) for v, e in envs.items()}
    torch = {v: next(p for p in pins if p.startswith("torch==")) for v, pins in pip.items()}
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    version = next(d for d in deps if d.startswith("torch==")).removeprefix("torch==")
    assert torch["cpu"] == f"torch=={version}"
    m = re.fullmatch(rf"torch=={re.escape(version)}\+(cu[0-9]+)", torch["cuda"])
    assert m, torch["cuda"]
    # the wheel index of that build, as an extra index (PyPI still serves the other pins)
    assert f"--extra-index-url https://download.pytorch.org/whl/{m.group(1)}" in pip["cuda"]
    assert not any(p.startswith("--") for p in pip["cpu"])
    # every other pin is the same in both, and both files are what `make envs` writes
    assert [p for p in pip["cpu"] if p != torch["cpu"]] == [p for p in pip["cuda"] if p != torch["cuda"]
                                                             and not p.startswith("--")]
    gen = _gen_envs()
    for v in ("cpu", "cuda"):
        assert (ROOT / f"envs/{v}.yaml").read_text() == gen.render(v), f"envs/{v}.yaml: run `make envs`"


def test_readme_states_prerequisites_that_match_the_repo():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Prerequisites", 1)[1].split("\n## ", 1)[0]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.12" and "Python 3.11" in section
    assert "make test-fast" in section and "root" in section.lower()
    assert "apt-get" in (ROOT / "scripts/slurm-local.sh").read_text()
    # run times are reported where the benchmarks are, not copied here
    assert "benchmarks/README.md" in section and (ROOT / "benchmarks/README.md").is_file()
    torch_cuda = re.search(r"torch==[0-9.]+\+cu[0-9]+", section).group(0)
    assert f'"{torch_cuda}"' in (ROOT / "envs/cuda.yaml").read_text()


def test_rule_files_are_snakefmt_clean():
    """The catalog's formatting convention: `snakefmt --check` (settings in pyproject.toml) leaves
    the Snakefile and every rule file unchanged."""
    snakefmt = Path(sys.executable).with_name("snakefmt")
    p = subprocess.run([str(snakefmt), "--check", "Snakefile", "workflow/"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
