#!/usr/bin/env bash
# The first layer precomputed on the generated 1M-node graph (BENCHMARKS.md section 26): a GCN
# (hidden 16, 2 layers) on 2-hop records of the node table against a GCN with a dense first
# layer on 1-hop records of [precompute]'s Â X, fanouts 10 and 2 each, one worker. Prints the
# precompute's time, each flatten's time and records' size, and each training's epoch time
# (EPOCHS epochs, the last one's seconds) and test accuracy at the best validation epoch.
#
#   bench/precompute-1m.sh [work_dir]      GRAPH=/tmp/graphflat-scale/g1000000 EPOCHS=3
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-precompute-1m}
GRAPH=${GRAPH:-/tmp/graphflat-scale/g1000000}
EPOCHS=${EPOCHS:-3}
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
echo "precompute: $(grep -o 'precompute finished in [0-9.]*s' "$WORK/precompute.log"); $(grep 'peak memory' "$WORK/precompute.log" | xargs)"

# case NAME NODES HOPS FANOUTS
case_of() {
  local name=$1 nodes=$2 hops=$3 fanouts=$4
  cat > "$WORK/$name.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$nodes"
edges = "$GRAPH/edges"
output = "$WORK/flat-$name"
overwrite = true
hops = $hops
fanouts = $fanouts
[train]
records = "$WORK/flat-$name"
output = "$WORK/model-$name"
overwrite = true
model = "gcn"
hidden = 16
epochs = $EPOCHS
TOML
  $BIN run "$WORK/$name.toml" > "$WORK/$name.log" 2>&1
  local flatten size epoch accuracy
  flatten=$(grep -o 'flatten finished in [0-9.]*s' "$WORK/$name.log" | grep -o '[0-9.]\+s')
  size=$(du -sm "$WORK/flat-$name" | cut -f1)
  epoch=$(grep -o "epoch $EPOCHS/$EPOCHS: .*" "$WORK/$name.log" | grep -o ', [0-9.]*s,' | head -1 | tr -d ', ')
  accuracy=$(grep -o 'test accuracy there [0-9.]*' "$WORK/$name.log" | grep -o '[0-9.]*$')
  echo "$name: flatten $flatten, records $size MB, epoch $EPOCHS $epoch, test accuracy $accuracy"
}

case_of plain-10-10 "$GRAPH/nodes" 2 "[10, 10]"
case_of ax-10 "$WORK/ax" 1 "[10]"
case_of plain-2-2 "$GRAPH/nodes" 2 "[2, 2]"
case_of ax-2 "$WORK/ax" 1 "[2]"
