"""`launcher` (workflow/rules/common.smk): a training rule's step starts as `python`, as the
file-store launcher `python -m methods.core.distributed` over the job's GPUs on one node, or as one torchrun per node under
`srun` when the job spans nodes; impossible geometries fail at planning time with one line."""
import re

import pytest

from .conftest import snakemake


def shells(tmp_path, *set_resources, check=True):
    out = snakemake("-n", "-p", "--set-resources", *set_resources,
                    config={"scale": "paper", "results_dir": tmp_path / "r", "reports_dir": tmp_path / "p"},
                    check=check)
    if not check:
        return out
    cmds = [l for l in out.stdout.splitlines() if l.startswith("Shell command:")]
    return {step: [c for c in cmds if f"-m methods.{step} " in c]
            for step in ("wd_plasticity pretrain", "siamesenorm train", "dag_moe train")}


def test_launch_follows_the_jobs_gpus_and_nodes(tmp_path):
    got = shells(tmp_path, "wd_plasticity_pretrain:gpu=4", "siamesenorm_train:nodes=2", "siamesenorm_train:gpu=16",
                 "siamesenorm_train:mpi=srun", "siamesenorm_train:tasks=2", "siamesenorm_train:tasks_per_gpu=0")
    assert all(got.values())
    for c in got["dag_moe train"]:          # paper default: one GPU, one process
        assert c.startswith("Shell command: python -m methods.dag_moe train"), c
    for c in got["wd_plasticity pretrain"]:
        assert c.startswith("Shell command: python -m methods.core.distributed --nproc-per-node 4 -m methods."), c
    for c in got["siamesenorm train"]:
        assert re.match(r"Shell command: RDZV_PORT=\d+ srun --nodes 2 --ntasks-per-node 1 --gpus-per-task 8 "
                        r"--cpus-per-task \d+ bash workflow/scripts/torchrun-slurm.sh 8 -m methods.siamesenorm train ", c), c


@pytest.mark.parametrize("resources,msg", [
    (("siamesenorm_train:nodes=2", "siamesenorm_train:gpu=15", "siamesenorm_train:mpi=srun",
      "siamesenorm_train:tasks=2"), "not a multiple of nodes=2"),
    (("siamesenorm_train:nodes=2", "siamesenorm_train:gpu=16"), "needs mpi='srun'"),
])
def test_impossible_launch_fails_when_planning(tmp_path, resources, msg):
    out = shells(tmp_path, *resources, check=False)
    assert out.returncode != 0 and msg in out.stdout + out.stderr
