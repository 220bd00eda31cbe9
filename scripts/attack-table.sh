#!/bin/sh
# The attack table of docs/threat-model.md: held-out accuracy of gym up
# under each attack (ATTACKS, at their default strengths) against the
# honest run of the same seed and configuration (median merge), the
# attackers' share of the rewards and what they were paid, when they were
# caught (ejected while the epoch ran, with the lag from their first delta
# in syncs and seconds, or at an epoch's merge) and the honest nodes
# slashed, for f = 1 of 4 and f = 2 of 7 workers, over several seeds. With OUTLIERS=off
# the attack runs use gym up --no-outlier-replays (hanzod replays only the
# keyed 10% share), to measure the attacks without that defence.
#
# Every run of a seed derives the workers' keys from it (--key-seed), so an
# attacked run and its honest twin train each worker on the same data. A
# third run per seed, n - f honest workers, shows what losing the
# attackers' share of the batch costs on its own (the table's first row).
# The runs are sequential (CPU-heavy) and resumable: each run's summary is
# kept as DIR/<workers>w-<attack>-s<seed>[-off].json and not run again.
#
# Usage: scripts/attack-table.sh [-o DIR] [SEEDS...]   (default: out/attack-table, seeds 0 1 2)
# Environment: EPOCHS (2), STEPS (20: steps per epoch), CONFIGS ("4:1 7:2"),
# ATTACKS ("noise alie alie-adaptive ipm mimic mimic-noise"; ATTACKS=all:
# signflip noise replay equivocate ring alie ipm mimic scale rewards), OUTLIERS (on;
# off: see above), TABLE_ONLY=1 (print the table from the summaries there, run nothing),
# PROFILE ("--data-parallel=false --interval 5": the local-steps profile the
# table in docs/threat-model.md was measured with; PROFILE= runs gym up's
# default, synchronous data parallelism).
set -eu
cd "$(dirname "$0")/.."
dir=out/attack-table
if [ "${1:-}" = "-o" ]; then dir=$2; shift 2; fi
seeds=${*:-0 1 2}
epochs=${EPOCHS:-2}
steps=${STEPS:-20}
configs=${CONFIGS:-4:1 7:2}
attacks=${ATTACKS:-noise alie alie-adaptive ipm mimic mimic-noise}
[ "$attacks" = all ] && attacks="signflip noise replay equivocate ring alie ipm mimic scale rewards"
profile=${PROFILE---data-parallel=false --interval 5}
suffix=""
extra=""
if [ "${OUTLIERS:-on}" = off ]; then suffix="-off" extra="--no-outlier-replays"; fi
mkdir -p "$dir"
if [ "${TABLE_ONLY:-0}" != 1 ]; then
  bin=$(mktemp -d)/gym
  go build -o "$bin" ./cmd/gym
  trap 'rm -rf "$(dirname "$bin")"' EXIT
  for c in $configs; do
    n=${c%:*} f=${c#*:}
    for s in $seeds; do
      for a in honest fewer $attacks; do
        name="${n}w-$a-s$s" w=$n
        case $a in
        honest) flags="--aggregation median" ;;
        fewer) flags="--aggregation median" w=$((n - f)) ;; # the honest run without the attackers' share
        *) flags="--byzantine $f --attack $a $extra" name="$name$suffix" ;;
        esac
        [ -s "$dir/$name.json" ] && continue
        echo "$(date -u +%H:%M:%S) gym up --workers $w --epochs $epochs --steps-per-epoch $steps --seed $s $flags" >&2
        # shellcheck disable=SC2086
        "$bin" up --workers "$w" --epochs "$epochs" --steps-per-epoch "$steps" --seed "$s" --key-seed "$s" $profile $flags \
          --out "$dir/run" --json >"$dir/$name.tmp" 2>"$dir/$name.log" || true
        mv "$dir/$name.tmp" "$dir/$name.json"
        rm -rf "$dir/run"
      done
    done
  done
fi
exec python3 - "$dir" "$configs" "$attacks" "$seeds" "$suffix" <<'PY'
import json, os, sys
d, configs, attacks, seeds, suffix = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5]
def load(n, a, s):
    name = f"{n}w-{a}-s{s}" + ("" if a == "honest" else suffix)
    try:
        with open(os.path.join(d, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def ok(r):
    return r is not None and r.get("status") == "published"
def caught(r):
    # when the attackers were caught: ejected while an epoch ran ("eN sK +Ls":
    # in epoch N, K syncs and L seconds after their first delta), or at an
    # epoch's merge ("eN merge"); "—": never
    ids = {x["id"] for x in r["nodes"] if x.get("attack")}
    got, out = set(), []
    for e in r.get("epochs", []):
        for j in e.get("ejections") or []:
            if j["node"] in ids and j["node"] not in got:
                got.add(j["node"])
                out.append(f"e{e['epoch']} +{j['lag_syncs']} syncs {j['lag_seconds']:.0f} s")
        for n in ids & set(e.get("forfeited") or []):
            if n not in got:
                got.add(n)
                out.append(f"e{e['epoch']} merge")
    if not out:
        return "—" if not any(x.get("slashed") for x in r["nodes"] if x.get("attack")) else "slashed"
    return ", ".join(out)
def share(r):
    paid = sum(x["reward"] for x in r["nodes"])
    return sum(x["reward"] for x in r["nodes"] if x.get("attack")) / paid if paid else 0.0
def paid(r):
    return sum(x["reward"] for x in r["nodes"] if x.get("attack"))
def honest_slashed(r):
    return sum(1 for x in r["nodes"] if not x.get("attack") and x.get("slashed"))
print("| workers, f | attack | held-out accuracy, seeds " + "/".join(seeds) + " | honest run, same seeds | mean Δ | attackers' reward share (fair share) | attackers paid (GYM) | caught | honest slashed |")
print("|---|---|---|---|---|---|---|---|---|")
worst = None
for c in configs:
    n, f = c.split(":")
    # What losing the attackers' share costs an honest run: n - f honest
    # workers on the same seeds (the f attackers' keys are the last ones).
    acc, hon, deltas = [], [], []
    for s in seeds:
        h, r = load(n, "honest", s), load(n, "fewer", s)
        acc.append(f"{r['eval_after']:.3f}" if ok(r) else "—")
        hon.append(f"{h['eval_after']:.3f}" if ok(h) else "—")
        if ok(r) and ok(h):
            deltas.append(r["eval_after"] - h["eval_after"])
    if deltas:
        print(f"| {n}, {f} | (honest, {int(n)-int(f)} workers) | {' / '.join(acc)} | {' / '.join(hon)} | {sum(deltas)/len(deltas):+.3f} | — | — | — | — |")
    for a in attacks:
        acc, hon, sh, cg, deltas, pd, hs = [], [], [], [], [], [], []
        for s in seeds:
            h, r = load(n, "honest", s), load(n, a, s)
            acc.append(f"{r['eval_after']:.3f}" if ok(r) else ("—" if r is None else r.get("status", "?")))
            hon.append(f"{h['eval_after']:.3f}" if ok(h) else "—")
            sh.append(f"{100*share(r):.1f}%" if ok(r) else "—")
            cg.append(caught(r) if ok(r) else "—")
            pd.append(f"{paid(r):.1f}" if ok(r) else "—")
            hs.append(str(honest_slashed(r)) if ok(r) else "—")
            if ok(r) and ok(h):
                dacc = r["eval_after"] - h["eval_after"]
                deltas.append(dacc)
                if worst is None or dacc < worst[0]:
                    worst = (dacc, n, f, a, s, r["eval_after"], h["eval_after"])
        mean = f"{sum(deltas)/len(deltas):+.3f}" if deltas else "—"
        print(f"| {n}, {f} | {a} | {' / '.join(acc)} | {' / '.join(hon)} | {mean} | {' / '.join(sh)} ({100*int(f)/int(n):.0f}%) | {' / '.join(pd)} | {' / '.join(cg)} | {' / '.join(hs)} |")
if worst:
    print(f"\nWorst case: {worst[3]}, f = {worst[2]} of {worst[1]}, seed {worst[4]}: {worst[5]:.3f} against {worst[6]:.3f} honest ({worst[0]:+.3f}).")
fp, nd, hit = 0, 0, 0
for c in configs:
    n = c.split(":")[0]
    for s in seeds:
        for a in (["honest"] if not suffix else []) + attacks:
            r = load(n, a, s)
            if not ok(r):
                continue
            bad = {x["id"] for x in r["nodes"] if x.get("attack")}
            for e in r["epochs"]:
                nd += e["deltas"]
                for t in e.get("targeted") or []:
                    node = t.split(" ")[0].split("/")[2]
                    if node in bad:
                        hit += 1
                    else:
                        fp += 1
if nd:
    print(f"Outlier replays over all these runs: {hit} of attackers' deltas, {fp} false alarms (honest deltas, each replayed and kept), against {nd} deltas merged.")
PY
