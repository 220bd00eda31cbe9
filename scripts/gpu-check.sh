#!/usr/bin/env bash
# The GPU check (issue 35, item 7; docs/gpu-owners.md): on a single-GPU
# machine, in under 8 minutes, trains a torch job on a random 0.5 B Qwen3 in
# bf16 and in 4-bit, has two validators check its deltas on the CPU, and
# prints one JSON report (step time, peak GPU memory, the trace-check
# distances between the GPU's bf16 and the CPU checker). The test suite runs
# it with --device cpu --size tiny (cmd/gym TestGPUCheckScript), so it
# cannot rot.
#
#   scripts/gpu-check.sh [--device cuda|cuda:N|cpu] [--size 0.5|2|tiny] [--out DIR]
#                        [--wheels DIR] [--python PY] [--gym BIN] [--timeout SECONDS]
#
# --wheels DIR: a machine without a package index installs torch,
# transformers, peft, bitsandbytes and their dependencies from the wheels in
# DIR (pip download -r python/requirements-worker.txt -d DIR, on a machine
# with one) into a fresh virtual environment under --out, with this
# checkout's gym_protocol. Without it the interpreter is --python, else
# $GYM_PYTHON, else python3. --gym: a built gym binary; without it one is
# built with go (which must then be on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda size=0.5 out=out/gpu-check wheels="" python="${GYM_PYTHON:-}" gym="" timeout=420
while (($#)); do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --gym) gym=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$wheels" ]; then
  venv="$out/venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-index --find-links "$wheels" -r python/requirements-worker.txt
  "$venv/bin/pip" install -q --no-index --find-links "$wheels" --no-deps -e ./python
  python="$venv/bin/python"
fi
[ -n "$python" ] || python=$(command -v python3)
if [ -z "$gym" ]; then
  gym="$out/gym"
  go build -o "$gym" ./cmd/gym
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" scripts/gpu_check.py --gym "$gym" --python "$python" --device "$device" --size "$size" \
  --out "$out/run" --timeout "$timeout"
