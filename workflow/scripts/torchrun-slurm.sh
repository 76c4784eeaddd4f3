#!/usr/bin/env bash
# One torchrun per node of a multi-node SLURM job, started by the `launcher` of
# workflow/rules/common.smk as
#   srun --nodes N --ntasks-per-node 1 ... bash workflow/scripts/torchrun-slurm.sh G -m methods.<slug> <step> ...
# G workers per node (one per GPU); all N torchruns meet at a c10d rendezvous hosted on the
# job's first node. srun sets SLURM_JOB_NODELIST and SLURM_NNODES in each task (the Snakemake
# SLURM plugin strips them from the job's own shell); `scontrol show hostnames` expands the
# compressed list (gpu[01-04]) into host names, the first one being the head node.
set -euo pipefail
nproc="$1"
shift
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
exec torchrun --nnodes "$SLURM_NNODES" --nproc-per-node "$nproc" \
    --rdzv-backend c10d --rdzv-endpoint "$head:${RDZV_PORT:-29500}" --rdzv-id "$SLURM_JOB_ID" "$@"
