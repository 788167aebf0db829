#!/usr/bin/env bash
# Control variates on the generated 1M-node graph (BENCHMARKS.md, "Control variates"): a GCN
# (hidden 16, 2 layers, the trainer's defaults otherwise) for EPOCHS epochs on one worker, per
# seed in SEEDS: plain 2-hop records of the node table with fanouts [10, 10], [5, 5] and [2, 2];
# over [precompute]'s Â X, 1-hop records with every in-edge (the exact GCN: the reference),
# fanout [2] plain, and with control variates fanout [2] and fanout [5] drawing 2 afresh each
# epoch. Prints each flatten's time and records' size, and per training the mean epoch, the
# test accuracy at the best validation epoch, the time to reach the exact run's best validation
# accuracy (from the training's start: the first step's offset, then the epochs' seconds,
# evaluation included), and the peak memory.
#
# RUNS picks the trainings (the exact one always runs: its best is the target).
#
#   bench/control-variates-1m.sh [work_dir]      GRAPH=/tmp/graphflat-scale/g1000000 EPOCHS=8 SEEDS="0 1 2"
#   RUNS="plain-10-10 cv-2" bench/control-variates-1m.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-cv-1m}
GRAPH=${GRAPH:-/tmp/graphflat-scale/g1000000}
EPOCHS=${EPOCHS:-8}
SEEDS=${SEEDS:-0 1 2}
RUNS=${RUNS:-plain-10-10 plain-5-5 plain-2-2 ax-2 cv-2 cv-5-draw2}
BIN=${BIN:-$PWD/target/release/graphflat}
[ -x "$BIN" ] || cargo build --release --quiet
mkdir -p "$WORK"
[ -f "$GRAPH/nodes/_SUCCESS" ] || $BIN generate --out "$GRAPH" --nodes 1000000 --feature-dim 32 --seed 1 > /dev/null
cat > "$WORK/precompute.toml" <<TOML
[cluster]
workers = 1
[precompute]
nodes = "$GRAPH/nodes"
edges = "$GRAPH/edges"
output = "$WORK/ax"
overwrite = true
TOML
$BIN run "$WORK/precompute.toml" > "$WORK/precompute.log" 2>&1
echo "precompute: $(grep -o 'precompute finished in [0-9.]*s' "$WORK/precompute.log")"

# flatten NAME NODES HOPS FANOUTS [KEYS...]
flatten() {
  local name=$1 nodes=$2 hops=$3 fanouts=$4 sampler=uniform
  shift 4
  [ "$fanouts" = all ] && sampler=all
  cat > "$WORK/flat-$name.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$nodes"
edges = "$GRAPH/edges"
output = "$WORK/flat-$name"
overwrite = true
hops = $hops
sampler = "$sampler"
$([ "$fanouts" = all ] || echo "fanouts = $fanouts")
$(printf '%s\n' "$@")
TOML
  $BIN run "$WORK/flat-$name.toml" > "$WORK/flat-$name.log" 2>&1
  echo "flatten $name: $(grep -o 'flatten finished in [0-9.]*s' "$WORK/flat-$name.log" | grep -o '[0-9.]\+s'), records $(du -sm "$WORK/flat-$name" | cut -f1) MB"
}

# train NAME RECORDS SEED [KEYS...]: the model's metrics.jsonl and timings.jsonl stay in WORK.
train() {
  local name=$1 records=$2 seed=$3
  shift 3
  cat > "$WORK/$name-$seed.toml" <<TOML
[cluster]
workers = 1
[train]
records = "$WORK/flat-$records"
output = "$WORK/model-$name-$seed"
overwrite = true
model = "gcn"
hidden = 16
epochs = $EPOCHS
cache_mb = 2048
seed = $seed
$(printf '%s\n' "$@")
TOML
  $BIN run "$WORK/$name-$seed.toml" > "$WORK/$name-$seed.log" 2>&1
}

# report NAME SEED TARGET: mean epoch, test accuracy, seconds to TARGET validation accuracy.
report() {
  local name=$1 seed=$2 target=$3
  python3 - "$WORK/model-$name-$seed" "$target" "$name seed $seed" "$(grep -o 'test accuracy there [0-9.]*' "$WORK/$name-$seed.log" | grep -o '[0-9.]*$')" "$(grep 'peak memory' "$WORK/$name-$seed.log" | grep -o '[0-9]* MB' | head -1)" <<'PY'
import json, sys
model, target, label, test, peak = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
metrics = [json.loads(l) for l in open(f"{model}/metrics.jsonl")]
timings = [json.loads(l) for l in open(f"{model}/timings.jsonl")]
import re
first = re.search(r"first step ([0-9.]+)s after the start", open(model.replace("/model-", "/") + ".log").read())
# From the training's start: the first step's offset holds the refresh before the first epoch.
spent, reached = float(first.group(1)) if first else 0.0, None
for m, t in zip(metrics, timings):
    spent += t["seconds"]
    if reached is None and m["valid_accuracy"] >= target:
        reached = spent
mean = sum(t["seconds"] for t in timings) / len(timings)
when = f"{reached:.1f}s" if reached is not None else f"not in {len(metrics)} epochs"
print(f"{label}: epoch {mean:.2f}s, test {test}, best valid {max(m['valid_accuracy'] for m in metrics):.4f}, to {target:.4f}: {when}, peak {peak}")
PY
}

# The records each run reads, flattened once (only those RUNS needs).
records_of() {
  case $1 in exact) echo ax-every ;; cv-2) echo ax-2 ;; cv-5-draw2) echo ax-5 ;; *) echo "$1" ;; esac
}
needs() { for run in $RUNS; do [ "$(records_of "$run")" = "$1" ] && return 0; done; return 1; }
needs plain-10-10 && flatten plain-10-10 "$GRAPH/nodes" 2 "[10, 10]"
needs plain-5-5 && flatten plain-5-5 "$GRAPH/nodes" 2 "[5, 5]"
needs plain-2-2 && flatten plain-2-2 "$GRAPH/nodes" 2 "[2, 2]"
flatten ax-every "$WORK/ax" 1 all
needs ax-2 && flatten ax-2 "$WORK/ax" 1 "[2]" "root_neighbors = true"
needs ax-5 && flatten ax-5 "$WORK/ax" 1 "[5]" "root_neighbors = true"
for seed in $SEEDS; do
  train exact ax-every "$seed"
  target=$(python3 -c "import json; print(max(json.loads(l)['valid_accuracy'] for l in open('$WORK/model-exact-$seed/metrics.jsonl')))")
  report exact "$seed" "$target"
  for run in $RUNS; do
    case $run in
      exact) ;;
      cv-2) train cv-2 ax-2 "$seed" "control_variate = true" ;;
      cv-5-draw2) train cv-5-draw2 ax-5 "$seed" "control_variate = true" "control_variate_fanout = 2" ;;
      *) train "$run" "$run" "$seed" ;;
    esac
    [ "$run" = exact ] || report "$run" "$seed" "$target"
  done
done
