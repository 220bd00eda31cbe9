#!/usr/bin/env bash
# Runs hanzod and three workers as containers (the images of
# scripts/image.sh) on a private network and a small job to Published,
# then checks that its checkpoint verifies. Uses podman (or docker:
# ENGINE=docker). On hosts where podman's default runtime cannot start
# containers (crun on hybrid cgroups, no CAP_SYS_RESOURCE), PODMAN_FLAGS
# and RUN_FLAGS adapt it; the defaults below are what worked on the build
# machine (Debian 12, podman 4.3, runc).
#
#   scripts/image.sh && scripts/container-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
engine=${ENGINE:-podman}
if [ "$engine" = podman ]; then
  read -r -a eflags <<< "${PODMAN_FLAGS:---runtime runc --cgroup-manager cgroupfs}"
  read -r -a rflags <<< "${RUN_FLAGS:---ulimit nofile=4096:4096 --ulimit nproc=4096:4096}"
else
  eflags=(); read -r -a rflags <<< "${RUN_FLAGS:-}"
fi
E() { "$engine" "${eflags[@]}" "$@"; }
tag=${TAG:-latest}
net=gym-e2e-$$
work=$(mktemp -d)
cleanup() {
  for c in hanzod w1 w2 w3; do E rm -f "$c-$$" >/dev/null 2>&1 || true; done
  E network rm -f "$net" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

gym="$work/gym"
go build -o "$gym" ./cmd/gym
head -c 24 /dev/urandom | base64 > "$work/admin-token"
chmod 644 "$work/admin-token"
# hanzod's signing key, whose ledger account must hold the orchestrator's
# stake before it merges (docs/orchestrator.md, "The orchestrator's key").
hanzod_id=$("$gym" keygen --out "$work/hanzod.key")
chmod 644 "$work/hanzod.key"
E network create "$net" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start=$(date +%s)
E run -d --name "hanzod-$$" --network "$net" --network-alias hanzod "${rflags[@]}" \
  -p "127.0.0.1:$port:9550" -v "$work/admin-token:/run/admin-token:ro" -v "$work/hanzod.key:/run/hanzod.key:ro" -e ORCHESTRATOR_KEY=/run/hanzod.key \
  -e HANZOD_INSECURE=true -e HANZOD_ADMIN_TOKEN_FILE=/run/admin-token -e HANZOD_ARTIFACTS_ADVERTISE=hanzod:9552 \
  "zoo-gym/hanzod:$tag" --threads 2 >/dev/null
for i in 1 2 3; do
  E run -d --name "w$i-$$" --network "$net" --network-alias "w$i" "${rflags[@]}" \
    -e ORCHESTRATOR_URL=grpc://hanzod:9550 -e USE_4BIT=false \
    "zoo-gym/gym:$tag" worker --data /data --listen 0.0.0.0:9560 --probe-listen 0.0.0.0:9561 --advertise-host "w$i" --threads 1 >/dev/null
done
export ORCHESTRATOR_URL="grpc://127.0.0.1:$port" ORCHESTRATOR_ADMIN_TOKEN=$(cat "$work/admin-token")
ids=()
for _ in $(seq 120); do
  mapfile -t ids < <("$gym" node list --json 2>/dev/null | python3 -c 'import json,sys; print("\n".join(n["id"] for n in json.load(sys.stdin)["nodes"]))' 2>/dev/null || true)
  [ "${#ids[@]}" -ge 3 ] && break
  sleep 1
done
[ "${#ids[@]}" -ge 3 ] || { echo "workers did not register"; E logs "hanzod-$$" | tail -20; exit 1; }
echo "3 workers registered after $(( $(date +%s) - start )) s"
for id in "${ids[@]}"; do
  "$gym" ledger deposit "$id" 10000 >/dev/null && "$gym" ledger bond "$id" 10000 >/dev/null
done
"$gym" ledger deposit treasury 1000 >/dev/null
"$gym" ledger deposit "$hanzod_id" 50000 >/dev/null && "$gym" ledger bond "$hanzod_id" 50000 >/dev/null
cat > "$work/job.yaml" <<'JOB'
model: builtin
dataset: addition
epochs: 1
min_nodes: 3
max_nodes: 3
steps_per_epoch: 4
prompts_per_step: 2
seed: 1
gspo:
  importance_sampling_level: sequence
  beta: 0.1
  group_size: 4
  aggregate_interval: 2
  lora_rank: 4
  lora_alpha: 8
  use_4bit: false
  max_seq_len: 12
  gradient_accumulation_steps: 1
  learning_rate: 2.0e-3
JOB
job=$("$gym" job submit "$work/job.yaml")
echo "submitted $job"
state=""
for _ in $(seq 600); do
  state=$("$gym" job status --json "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  case "$state" in published|failed) break ;; esac
  sleep 1
done
"$gym" job status "$job"
[ "$state" = published ] || { E logs "hanzod-$$" | tail -30; exit 1; }
# A worker container fetches the checkpoint from hanzod's artifact server
# over the network (signed manifest, verified DAG).
E exec "w1-$$" gym job checkpoint --orchestrator grpc://hanzod:9550 "$job" --out /data/ckpt
echo "OK: job $job published by hanzod in a container with 3 worker containers, $(( $(date +%s) - start )) s"
