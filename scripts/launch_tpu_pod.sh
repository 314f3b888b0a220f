#!/usr/bin/env bash
# GRPO on a Cloud TPU v5p pod slice: the same tbjax.train on every worker, joined by jax.distributed with
# worker 0 as coordinator and each worker's rank from the TPU metadata server.
#   scripts/launch_tpu_pod.sh TPU_NAME ZONE [key=value ...]
# Every worker needs this repository and its .venv at REPO_DIR (default: ~/tbjax).
# TBJAX_LAUNCH_DRY_RUN=1 prints the gcloud command instead of running it.
set -euo pipefail

tpu=${1:?usage: $0 TPU_NAME ZONE [key=value ...]}
zone=${2:?usage: $0 TPU_NAME ZONE [key=value ...]}
shift 2
mapfile -t workers < <(gcloud compute tpus tpu-vm describe "$tpu" --zone "$zone" \
  --flatten='networkEndpoints[]' --format='value(networkEndpoints.ipAddress)')
rank='$(curl -sf -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number)'
remote="cd ${REPO_DIR:-~/tbjax} && JAX_COORDINATOR_ADDRESS=${workers[0]}:${TBJAX_COORDINATOR_PORT:-8476} \
JAX_NUM_PROCESSES=${#workers[@]} JAX_PROCESS_ID=$rank .venv/bin/python -m tbjax.train \
--config configs/qwen3-27b-tpu-v5p.yaml $(printf '%q ' "$@")"
command=(gcloud compute tpus tpu-vm ssh "$tpu" --zone "$zone" --worker=all --command "$remote")

if [[ -n "${TBJAX_LAUNCH_DRY_RUN:-}" ]]; then
  printf '%q ' "${command[@]}"
  echo
  exit 0
fi
exec "${command[@]}"
