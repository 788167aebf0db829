#!/usr/bin/env bash
# Full-graph training's exchange over a limited wire (BENCHMARKS.md section 23): 2 processes of
# one worker each in two network namespaces joined by a veth pair limited to RATE each way
# (bench/wire.sh; needs root), the exact exchange against SANCUS's stale copies
# (halo_staleness, halo_threshold) and rows at bfloat16 (halo_precision), back to back. A
# setting is "staleness,threshold" or "staleness,threshold,precision" (f32 when left out).
# Each run prints its wall seconds, the summary's `exchanged:` line (bytes the training passes
# sent an epoch against the exact exchange's) and the test accuracy at the best validation
# epoch.
#
#   bench/full-graph-wire.sh NODES EDGES [work_dir]   RATE=10mbit EPOCHS=200 MODEL=gcn
#       SETTINGS="0,0 5,0.1 5,0.3 10,0.5 0,0,bf16" EXTRA='normalize_features = true'
#
# Cora: NODES=data/cora/nodes EDGES=data/cora/edges (`graphflat import ogb`); the generated
# 1M graph: bench/scale.sh's g1000000 with RATE=1gbit EPOCHS=20.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=$(realpath "$1"); EDGES=$(realpath "$2")
WORK=${3:-/tmp/graphflat-full-wire}
RATE=${RATE:-10mbit}
EPOCHS=${EPOCHS:-200}
MODEL=${MODEL:-gcn}
SETTINGS=${SETTINGS:-"0,0 5,0.1 5,0.3 10,0.5"}
EXTRA=${EXTRA:-}
BIN=${BIN:-$PWD/target/release/graphflat}
[ -n "${BIN_BUILT:-}" ] || cargo build --release --quiet
mkdir -p "$WORK"
TAG=gffw$$
source bench/wire.sh
trap wire_down EXIT
wire_up
port=$((20000 + $$ % 20000))
for setting in $SETTINGS; do
  IFS=, read -r staleness threshold precision <<< "$setting"
  precision=${precision:-f32}
  name=s$staleness-t$threshold-$precision
  printf '[cluster]\nworkers = 1\nprocesses = 2\nhosts = ["10.78.0.1:%s", "10.78.0.2:%s"]\n' $port $port > "$WORK/$name.toml"
  cat >> "$WORK/$name.toml" <<TOML
[train]
nodes = "$NODES"
edges = "$EDGES"
output = "$WORK/model-$name"
overwrite = true
model = "$MODEL"
hidden = 16
epochs = $EPOCHS
halo_staleness = $staleness
halo_threshold = $threshold
halo_precision = "$precision"
$EXTRA
TOML
  start=$(date +%s.%N)
  ip netns exec ${TAG}b "$BIN" run "$WORK/$name.toml" --process 1 > "$WORK/$name-1.log" 2>&1 &
  ip netns exec ${TAG}a "$BIN" run "$WORK/$name.toml" --process 0 > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
  wait $! || { cat "$WORK/$name-1.log"; exit 1; }
  seconds=$(echo "$(date +%s.%N) - $start" | bc | xargs printf '%.2f')
  port=$((port + 1))
  echo "staleness $staleness, threshold $threshold, $precision: ${seconds}s; $(grep -o 'train finished in [0-9.]*s' "$WORK/$name.log");" \
    "$(grep -o 'test accuracy there [0-9.]*' "$WORK/$name.log")"
  grep "exchanged:" "$WORK/$name.log" | sed 's/^ */    /'
done
