#!/usr/bin/env bash
# The reference run on SLURM: 3 nodes x 8 GPUs, one tbjax.train process per node joined by jax.distributed
# (the coordinator is the allocation's first host), each process driving its node's 8 GPUs.
#   sbatch scripts/launch_slurm.sh [key=value ...]     (from the repository root, with its .venv on every node)
# TBJAX_LAUNCH_DRY_RUN=1 prints the environment and the srun command instead of running them.
#SBATCH --job-name=tbjax-grpo
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
set -euo pipefail

mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
export JAX_COORDINATOR_ADDRESS="${hosts[0]}:${TBJAX_COORDINATOR_PORT:-$((20000 + SLURM_JOB_ID % 20000))}"
export JAX_NUM_PROCESSES="${#hosts[@]}"
# JAX_PROCESS_ID differs per task, so it is set inside srun from the task's own rank.
command=(srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'JAX_PROCESS_ID=$SLURM_PROCID exec "$@"' tbjax
         "${PYTHON:-.venv/bin/python}" -m tbjax.train --mesh 3x8 --config configs/qwen3-27b-3x8-h100.yaml "$@")

if [[ -n "${TBJAX_LAUNCH_DRY_RUN:-}" ]]; then
  echo "JAX_COORDINATOR_ADDRESS=$JAX_COORDINATOR_ADDRESS JAX_NUM_PROCESSES=$JAX_NUM_PROCESSES"
  printf '%q ' "${command[@]}"
  echo
  exit 0
fi
exec "${command[@]}"
