"""Helpers to run the real Snakefile from the repository root in a subprocess."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def snakemake_env() -> dict:
    env = dict(os.environ)
    # rules call `python -m ...`: make it this interpreter's venv python
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(OMP_NUM_THREADS="1", TQDM_DISABLE="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def snakemake(*args: str, config: dict | None = None, timeout: int = 900, check: bool = True,
              **popen) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *args]
    if config:
        cmd += ["--config", *(f"{k}={v}" for k, v in config.items())]
    out = subprocess.run(cmd, cwd=ROOT, env=snakemake_env(), capture_output=True, text=True,
                         timeout=timeout, **popen)
    if check and out.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
    return out


def job_counts(dry_run_output: str) -> dict[str, int]:
    """The job-stats table of `snakemake -n --quiet rules` as {rule: count}."""
    counts = {}
    for line in dry_run_output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            counts[parts[0]] = int(parts[1])
    return counts


def plan_paper(tmp_path: Path, paper: str, scale: str) -> tuple[dict, dict[str, int]]:
    """(the paper's section of config/scales/<scale>.yaml, {rule: jobs} of a dry run of its
    claims target at that scale)."""
    import yaml

    sec = yaml.safe_load((ROOT / "config" / "scales" / f"{scale}.yaml").read_text())[paper]
    target = tmp_path / "r" / scale / paper / "claims.json"
    out = snakemake(str(target), "-n", "--quiet", "rules", config={"scale": scale, "results_dir": tmp_path / "r"})
    return sec, job_counts(out.stdout)


def copy_scales(dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in (ROOT / "config" / "scales").glob("*.yaml"):
        shutil.copy(f, dst / f.name)
    return dst


def config_error(out: subprocess.CompletedProcess) -> str:
    """The one `invalid config ...` line of a run that must fail on its config (asserts the
    failure and that there is exactly one such line)."""
    assert out.returncode != 0, out.stdout[-2000:]
    msg = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("invalid config")]
    assert len(msg) == 1, out.stderr[-2000:]
    return msg[0]


def bad_scale_edit(tmp_path: Path, old: str, new: str) -> str:
    """Dry-run the smoke DAG with the first `old` replaced by `new` in a copy of smoke.yaml;
    return the one-line config error, which must name smoke.yaml."""
    scales = copy_scales(tmp_path / "scales")
    text = (scales / "smoke.yaml").read_text()
    assert old in text, old
    (scales / "smoke.yaml").write_text(text.replace(old, new, 1))
    out = snakemake("-n", config={"scale": "smoke", "scales_dir": scales, "results_dir": tmp_path / "r"}, check=False)
    msg = config_error(out)
    assert "smoke.yaml" in msg, msg
    return msg


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The whole smoke DAG, once per session, in a temporary results/reports root."""
    base = tmp_path_factory.mktemp("smoke")
    cfg = {"scale": "smoke", "results_dir": base / "results", "reports_dir": base / "reports"}
    out = snakemake("--cores", "2", config=cfg, timeout=2400)
    return {"config": cfg, "base": base, "stdout": out.stdout + out.stderr}
