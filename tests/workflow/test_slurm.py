"""The smoke-scale wd_plasticity workflow, run through a real SLURM cluster with profiles/slurm.

Needs a cluster that answers `sinfo` (`make slurm-up` starts a single-node one). Without one the
test is skipped, unless REQUIRE_SLURM=1 (set by `make test`): then it fails.
Outputs go to a temporary directory, so the cluster's nodes must share /tmp with this host
(true for the local single-node cluster).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import snakemake_env

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
PAPER = "wd_plasticity"
TIMEOUT_S = 15 * 60
USABLE_NODE_STATES = {"idle", "mixed", "allocated", "completing"}
# what snakemake-executor-plugin-slurm logs for each sbatch (regular, non-array jobs)
SUBMITTED_RE = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+)")
# snakemake's job header: "rule x:" for a job sent to the executor, "localrule x:" for local ones
REMOTE_RULE_RE = re.compile(r"^rule (\w+):$", re.MULTILINE)


def _cluster_problem() -> str | None:
    """None when SLURM answers and has a usable node, else why not."""
    if shutil.which("sinfo") is None:
        return "`sinfo` not found (no SLURM client installed)"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%a %T"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "`sinfo` timed out (slurmctld does not answer)"
    if proc.returncode != 0:
        return f"`sinfo` failed: {proc.stderr.strip() or proc.returncode}"
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    if not any(r == ["up", state] for r in rows for state in USABLE_NODE_STATES):
        return f"no partition up with a usable node (sinfo: {proc.stdout.strip()!r})"
    return None


def _require_cluster() -> None:
    """Skip without a cluster; fail instead (not error) under REQUIRE_SLURM=1."""
    problem = _cluster_problem()
    if problem is None:
        return
    if os.environ.get("REQUIRE_SLURM") == "1":
        pytest.fail(f"REQUIRE_SLURM=1 but no usable SLURM cluster: {problem}")
    pytest.skip(f"no SLURM cluster: {problem}; `make slurm-up` starts a local one")


def _slurmctld_log() -> Path | None:
    """The controller's log file when this host can read it (root on the local cluster)."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^SlurmctldLogFile\s*=\s*(\S+)", out, re.MULTILINE)
    path = Path(m.group(1)) if m else None
    return path if path is not None and os.access(path, os.R_OK) else None


def _completed_elsewhere(jobid: str) -> bool:
    """COMPLETED with exit 0 per scontrol (until MinJobAge) or sacct (needs accounting)."""
    for cmd in (
        ["scontrol", "-o", "show", "job", jobid],
        ["sacct", "-n", "-X", "-P", "-j", jobid, "-o", "State,ExitCode"],
    ):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if re.search(r"JobState=COMPLETED\b.*\bExitCode=0:0\b", out):
            return True
        if out.strip() == "COMPLETED|0:0":
            return True
    return False


def _run_snakemake(cmd: list[str], log: Path) -> int:
    """Run cmd from the repo root, output to `log`; on timeout interrupt it (snakemake then
    scancels its jobs), kill it if it hangs, and scancel whatever it had submitted."""
    # Jobs inherit this environment (sbatch --export=ALL): venv first on PATH, so the rules'
    # `python` is ours, and one thread per job, as in the local workflow tests.
    env = snakemake_env()
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    ids = [j for _, j in SUBMITTED_RE.findall(log.read_text(errors="replace"))]
    if ids and shutil.which("scancel"):
        subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
    pytest.fail(f"snakemake did not finish within {TIMEOUT_S} s; output: {log}")


def test_smoke_workflow_runs_on_slurm(tmp_path):
    _require_cluster()
    target = tmp_path / "results" / "smoke" / PAPER / "claims.json"
    cmd = [
        sys.executable, "-m", "snakemake",
        "--profile", "profiles/slurm",
        "--config", "scale=smoke",
        f"results_dir={tmp_path / 'results'}",
        f"reports_dir={tmp_path / 'reports'}",
        "--", str(target),
    ]  # fmt: skip
    ctld_log = _slurmctld_log()
    ctld_offset = ctld_log.stat().st_size if ctld_log else 0  # only lines of this run count

    log = tmp_path / "snakemake.log"
    rc = _run_snakemake(cmd, log)
    out = log.read_text(errors="replace")
    tail = "\n".join(out.splitlines()[-60:])
    assert rc == 0, f"snakemake exited {rc}; last lines of {log}:\n{tail}"

    assert target.is_file(), f"{target} was not written; last lines:\n{tail}"
    claims = json.loads(target.read_text())
    assert isinstance(claims.get("claims"), list), f"no 'claims' list in {target}: {claims!r}"

    # Every non-local job went through sbatch ...
    submitted = SUBMITTED_RE.findall(out)
    assert submitted, f"no job was submitted to SLURM; last lines:\n{tail}"
    remote_jobs = REMOTE_RULE_RE.findall(out)
    assert len(submitted) == len(remote_jobs), (
        f"{len(remote_jobs)} non-local jobs ({sorted(set(remote_jobs))}) but "
        f"{len(submitted)} SLURM submissions"
    )
    # ... and SLURM itself recorded each of those jobs as finished with exit status 0.
    slurm_ids = [j for _, j in submitted]
    if ctld_log is not None:
        with ctld_log.open(errors="replace") as fh:
            fh.seek(ctld_offset)
            ctld = fh.read()
        done = set(re.findall(r"_job_complete: JobId=(\d+) WEXITSTATUS 0\b", ctld))
        missing = [j for j in slurm_ids if j not in done and not _completed_elsewhere(j)]
    else:
        missing = [j for j in slurm_ids if not _completed_elsewhere(j)]
    assert not missing, f"SLURM has no successful completion for job ids {missing}"
