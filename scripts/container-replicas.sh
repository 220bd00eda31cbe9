#!/usr/bin/env bash
# Three hanzod containers (the image of scripts/image.sh) over one Valkey
# store on a private network: exactly one leads (hanzod health --leader);
# when the leader's container is stopped, another takes the lease and the
# log continues there. The store is the host's redis-server (Valkey's
# protocol; no registry is needed for a Valkey image) with a random
# password (the network's bridge, and so its gateway address, only exists
# once a container runs on it, so the server listens on every address).
#
#   scripts/image.sh && scripts/container-replicas.sh
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-podman}
if [ "$engine" = podman ]; then
  read -r -a eflags <<< "${PODMAN_FLAGS:---runtime runc --cgroup-manager cgroupfs}"
  read -r -a rflags <<< "${RUN_FLAGS:---ulimit nofile=4096:4096 --ulimit nproc=4096:4096}"
else
  eflags=(); read -r -a rflags <<< "${RUN_FLAGS:-}"
fi
E() { "$engine" "${eflags[@]}" "$@"; }
server=$(command -v valkey-server || command -v redis-server)
tag=${TAG:-latest}
net=gym-replicas-$$
work=$(mktemp -d)
cleanup() {
  for i in 1 2 3; do E rm -f "hanzod-$i-$$" >/dev/null 2>&1 || true; done
  E network rm -f "$net" >/dev/null 2>&1 || true
  [ -f "$work/kv.pid" ] && kill "$(cat "$work/kv.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
E network create "$net" >/dev/null
gw=$(E network inspect "$net" --format '{{range .Subnets}}{{.Gateway}}{{end}}')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pass=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
"$server" --bind 0.0.0.0 --port "$port" --requirepass "$pass" --save "" --appendonly no --daemonize yes \
  --pidfile "$work/kv.pid" --logfile "$work/kv.log" --dir "$work"
for _ in $(seq 50); do [ -s "$work/kv.pid" ] && break; sleep 0.1; done

for i in 1 2 3; do
  E run -d --name "hanzod-$i-$$" --network "$net" "${rflags[@]}" \
    -e VALKEY_URL="redis://:$pass@$gw:$port/0" -e HANZOD_LOG_LEVEL=info \
    "zoo-gym/hanzod:$tag" >/dev/null
done
leaders() {
  local n=0 who=""
  for i in "$@"; do
    if E exec "hanzod-$i-$$" /usr/local/bin/hanzod health --leader >/dev/null 2>&1; then n=$((n + 1)); who=$i; fi
  done
  echo "$n $who"
}
read -r n first < <(
  for _ in $(seq 60); do r=$(leaders 1 2 3); [ "${r%% *}" = 1 ] && { echo "$r"; exit; }; sleep 1; done; echo "0 -"
)
[ "$n" = 1 ] || { echo "want one leader, got $n"; E logs "hanzod-1-$$" | tail; exit 1; }
for i in 1 2 3; do
  E exec "hanzod-$i-$$" /usr/local/bin/hanzod health >/dev/null || { echo "replica $i not alive"; exit 1; }
done
echo "one leader of three: hanzod-$first"
t0=$(date +%s%N)
E stop -t 10 "hanzod-$first-$$" >/dev/null
rest=(); for i in 1 2 3; do [ "$i" = "$first" ] || rest+=("$i"); done
read -r n second < <(
  for _ in $(seq 100); do r=$(leaders "${rest[@]}"); [ "${r%% *}" = 1 ] && { echo "$r"; exit; }; sleep 0.2; done; echo "0 -"
)
[ "$n" = 1 ] || { echo "no new leader after stopping hanzod-$first"; exit 1; }
echo "OK: hanzod-$second leads $(( ($(date +%s%N) - t0) / 1000000 )) ms after hanzod-$first was stopped"
