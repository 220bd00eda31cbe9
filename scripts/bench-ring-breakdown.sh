#!/bin/sh
# Where a byte's time goes in the ring all-reduce (docs/ring.md): runs
# `gym ring bench` on loopback (4 nodes, 64 MiB, K timed calls) with
# authentication and TLS on and off, profiles every node process
# (GYM_RING_CPUPROFILE) and prints CPU nanoseconds per byte of the vector
# per node, by kind of work, counted on the call's own goroutines only
# (the harness's input set-up and checks are left out), plus busbw and
# the auth-on / auth-off ratios of time and CPU.
# Usage: scripts/bench-ring-breakdown.sh [ITERS]   (default 10)
set -eu
cd "$(dirname "$0")/.."
iters=${1:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gym" ./cmd/gym
for c in "auth=true tls=true" "auth=false tls=true" "auth=true tls=false" "auth=false tls=false"; do
  set -- $c
  d="$tmp/$1-$2"
  mkdir -p "$d"
  GYM_RING_CPUPROFILE="$d" "$tmp/gym" ring bench --nodes 4 --size 64MiB --iters "$iters" --"$1" --"$2" --json > "$d/result.json"
  go tool pprof -top -nodecount=100000 -focus='ring\.\(\*callState\)|protocol/ring/tcp\.\(\*inConn\)\.read|protocol/ring/tcp\.\(\*outConn\)' \
    "$tmp/gym" "$d"/node-*.pprof > "$d/top.txt" 2>/dev/null
done
python3 - "$tmp" "$iters" <<'PY'
import json, os, re, sys
tmp, iters = sys.argv[1], int(sys.argv[2])
calls = iters + 1           # the warm-up call is profiled too; barriers are one element
vec = 64 << 20
nodes = 4
kinds = [("hash (BLAKE3)", r"blake3|PayloadHash"),
         ("Ed25519 sign + verify", r"ed25519|edwards25519|sha512"),
         ("TLS AES-GCM", r"aes|gcm|ghash"),
         ("memory copies", r"memmove|memclr"),
         ("reduce / store (apply)", r"callState\)\.apply"),
         ("syscalls (kernel TCP copies)", r"[Ss]yscall"),
         ("Go runtime, scheduling, other", r".")]
def unit(s):
    m = re.match(r"([\d.]+)(ms|s|us|µs|ns)?$", s)
    v = float(m.group(1))
    return v * {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, None: 1}[m.group(2)]
rows, res = {}, {}
for cfg in ["auth=true-tls=true", "auth=false-tls=true", "auth=true-tls=false", "auth=false-tls=false"]:
    d = os.path.join(tmp, cfg)
    res[cfg] = json.loads(open(os.path.join(d, "result.json")).read().splitlines()[0])
    tot = {k: 0.0 for k, _ in kinds}
    for line in open(os.path.join(d, "top.txt")):
        f = line.split()
        if len(f) < 6 or not re.match(r"[\d.]+(ms|s|us|µs|ns)?$", f[0]) or "%" not in f[1]:
            continue
        name = " ".join(f[5:])
        for k, rx in kinds:
            if re.search(rx, name):
                tot[k] += unit(f[0])
                break
    rows[cfg] = {k: v * 1e9 / (calls * vec * nodes) for k, v in tot.items()}
cfgs = list(rows)
print("| ns per vector byte per node | " + " | ".join(c.replace("-", ", ") for c in cfgs) + " |")
print("|---|" + "---|" * len(cfgs))
for k, _ in kinds:
    print(f"| {k} | " + " | ".join(f"{rows[c][k]:.3f}" for c in cfgs) + " |")
print("| **total CPU on the call's goroutines** | " + " | ".join(f"**{sum(rows[c].values()):.3f}**" for c in cfgs) + " |")
print("| busbw GB/s (median of %d) | " % iters + " | ".join(f"{res[c]['busbw']:.3f}" for c in cfgs) + " |")
a, b = "auth=true-tls=true", "auth=false-tls=true"
print(f"\nauth on / auth off (TLS on): time {res[b]['busbw']/res[a]['busbw']:.2f}x, CPU {sum(rows[a].values())/sum(rows[b].values()):.2f}x")
a, b = "auth=true-tls=false", "auth=false-tls=false"
print(f"auth on / auth off (plain TCP): time {res[b]['busbw']/res[a]['busbw']:.2f}x, CPU {sum(rows[a].values())/sum(rows[b].values()):.2f}x")
PY
