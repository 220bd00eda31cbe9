#!/bin/sh
# Convergence table of the end-to-end run (docs/end-to-end.md): final
# held-out accuracy and wall time for one worker alone (gym train), four
# workers (gym up) and four workers with one Byzantine (each attack), at the
# same total number of samples (90 steps × 16 prompts × 8 completions), over
# several seeds. Usage: scripts/bench-e2e.sh [SEEDS...]   (default: 0 1 2)
# `gym bench quality` measures one worker against 4 and 8 at equal samples
# with gaps, means, spreads and wall times (docs/end-to-end.md,
# "Convergence"); this script adds every attack.
set -eu
cd "$(dirname "$0")/.."
seeds=${*:-0 1 2}
bin=$(mktemp -d)/gym
go build -o "$bin" ./cmd/gym
out=$(mktemp -d)
trap 'rm -rf "$out" "$(dirname "$bin")"' EXIT
acc() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d["eval_after"], d.get("total_s", d.get("seconds")), d.get("status","published"))'; }
printf '| configuration | seed | held-out accuracy | wall s | status |\n|---|---|---|---|---|\n'
for s in $seeds; do
  set -- $("$bin" train --steps 90 --seed "$s" --out "$out/train-$s" --json 2>/dev/null | acc)
  printf '| 1 worker (gym train, 16 prompts/step) | %s | %s | %.1f | %s |\n' "$s" "$1" "$2" "$3"
  set -- $("$bin" up --seed "$s" --out "$out/up-$s" --json 2>/dev/null | acc)
  printf '| 4 workers (gym up, 4 prompts/step each) | %s | %s | %.1f | %s |\n' "$s" "$1" "$2" "$3"
  for a in signflip noise replay equivocate; do
    set -- $("$bin" up --seed "$s" --byzantine 1 --attack "$a" --out "$out/up-$a-$s" --json 2>/dev/null | acc)
    printf '| 4 workers, 1 Byzantine (%s), median | %s | %s | %.1f | %s |\n' "$a" "$s" "$1" "$2" "$3"
  done
done
