#!/bin/sh
# The in-bound attack table of docs/threat-model.md: held-out accuracy of
# gym up under each in-bound attack (noise, alie, ipm, mimic) against the
# honest run of the same seed and configuration, and the attackers' share of
# the rewards, for f = 1 of 4 and f = 2 of 7 workers, over several seeds.
# The runs are sequential (CPU-heavy) and resumable: each run's summary is
# kept as DIR/<workers>w-<attack>-s<seed>.json and not run again.
#
# Usage: scripts/attack-table.sh [-o DIR] [SEEDS...]   (default: out/attack-table, seeds 0 1 2)
# Environment: EPOCHS (2), STEPS (20: steps per epoch), CONFIGS ("4:1 7:2"),
# ATTACKS ("noise alie ipm mimic"), TABLE_ONLY=1 (print the table from the
# summaries already there, run nothing).
set -eu
cd "$(dirname "$0")/.."
dir=out/attack-table
if [ "${1:-}" = "-o" ]; then dir=$2; shift 2; fi
seeds=${*:-0 1 2}
epochs=${EPOCHS:-2}
steps=${STEPS:-20}
configs=${CONFIGS:-4:1 7:2}
attacks=${ATTACKS:-noise alie ipm mimic}
mkdir -p "$dir"
if [ "${TABLE_ONLY:-0}" != 1 ]; then
  bin=$(mktemp -d)/gym
  go build -o "$bin" ./cmd/gym
  trap 'rm -rf "$(dirname "$bin")"' EXIT
  for c in $configs; do
    n=${c%:*} f=${c#*:}
    for s in $seeds; do
      for a in honest $attacks; do
        name="${n}w-$a-s$s"
        [ -s "$dir/$name.json" ] && continue
        if [ "$a" = honest ]; then flags="--aggregation median"; else flags="--byzantine $f --attack $a"; fi
        echo "$(date -u +%H:%M:%S) gym up --workers $n --epochs $epochs --steps-per-epoch $steps --seed $s $flags" >&2
        # shellcheck disable=SC2086
        "$bin" up --workers "$n" --epochs "$epochs" --steps-per-epoch "$steps" --seed "$s" $flags \
          --out "$dir/run" --json >"$dir/$name.tmp" 2>"$dir/$name.log" || true
        mv "$dir/$name.tmp" "$dir/$name.json"
        rm -rf "$dir/run"
      done
    done
  done
fi
python3 - "$dir" "$configs" "$attacks" "$seeds" <<'PY'
import json, os, sys
d, configs, attacks, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
def load(n, a, s):
    p = os.path.join(d, f"{n}w-{a}-s{s}.json")
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def caught(run):
    # the first epoch whose merge forfeited an attacker, or "—"
    ids = {x["id"] for x in run["nodes"] if x.get("attack")}
    for e in run.get("epochs", []):
        if ids & set(e.get("forfeited") or []):
            return f"e{e['epoch']}"
    return "—"
print("| workers, f | attack | " + " | ".join(f"seed {s}: accuracy (honest), attackers' reward share, caught" for s in seeds) + " | mean Δ accuracy |")
print("|---|---|" + "---|" * (len(seeds) + 1))
worst = None
for c in configs:
    n, f = c.split(":")
    for a in attacks:
        cells, deltas = [], []
        for s in seeds:
            h, r = load(n, "honest", s), load(n, a, s)
            if not h or not r or r.get("status") != "published" or h.get("status") != "published":
                cells.append("not run" if not r else r.get("status", "?"))
                continue
            paid = sum(x["reward"] for x in r["nodes"])
            att = sum(x["reward"] for x in r["nodes"] if x.get("attack"))
            share = att / paid if paid else 0
            dacc = r["eval_after"] - h["eval_after"]
            deltas.append(dacc)
            cells.append(f"{r['eval_after']:.3f} ({h['eval_after']:.3f}), {100*share:.1f}% (fair {100*int(f)/int(n):.0f}%), {caught(r)}")
            if worst is None or dacc < worst[0]:
                worst = (dacc, n, f, a, s)
        mean = f"{sum(deltas)/len(deltas):+.3f}" if deltas else "—"
        print(f"| {n}, {f} | {a} | " + " | ".join(cells) + f" | {mean} |")
if worst:
    print(f"\nWorst case: {worst[3]} with f = {worst[2]} of {worst[1]}, seed {worst[4]}: {worst[0]:+.3f} held-out accuracy against the honest run.")
PY
