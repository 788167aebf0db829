#!/usr/bin/env bash
# Cora with the first layer precomputed ([precompute], docs/precompute.md) against plain
# records, GCN with Kipf and Welling's settings (hidden 16, dropout 0.5, Adam 0.01, weight decay
# 5e-4, 200 epochs, 140 labeled nodes a batch), one worker, one kernel thread, for each seed in
# SEEDS: every in-edge and fanouts [5, 5] and [2, 2] over the node table (2 hops), and every
# in-edge and fanouts [5] and [2] over its Â X (1 hop). Prints, per run, the records' size, the
# training loop's time and the test accuracy at the best validation epoch.
#
#     SEEDS="0 1 2" bench/precompute-cora.sh [work-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-precompute-cora}
SEEDS=${SEEDS:-0 1 2}
BIN=${BIN:-target/release/graphflat}
CORA=${CORA:-../shared/data/cora}
[ -x "$BIN" ] || cargo build --release
mkdir -p "$WORK"
[ -f "$WORK/cora/nodes/_SUCCESS" ] || $BIN import ogb "$CORA" --out "$WORK/cora" > /dev/null 2>&1
cat > "$WORK/precompute.toml" <<TOML
[precompute]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/ax"
normalize_features = true
overwrite = true
TOML
$BIN run "$WORK/precompute.toml" > "$WORK/precompute.log" 2>&1
echo "precompute: $(grep -o 'precompute finished in [0-9.]*s' "$WORK/precompute.log")"

# run NAME NODES HOPS FANOUTS NORMALIZE SEED
run() {
  local name=$1 nodes=$2 hops=$3 fanouts=$4 normalize=$5 seed=$6 sampler=uniform
  [ "$fanouts" = all ] && sampler=all
  cat > "$WORK/$name.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$nodes"
edges = "$WORK/cora/edges"
output = "$WORK/flat-$name"
overwrite = true
hops = $hops
sampler = "$sampler"
$([ "$fanouts" = all ] || echo "fanouts = $fanouts")
[train]
records = "$WORK/flat-$name"
output = "$WORK/model-$name"
overwrite = true
model = "gcn"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4
epochs = 200
batch_size = 140
normalize_features = $normalize
cache_mb = 1024
kernel_threads = 1
seed = $seed
TOML
  $BIN run "$WORK/$name.toml" > "$WORK/$name.log" 2>&1
  local size accuracy seconds
  size=$(du -sk "$WORK/flat-$name" | cut -f1)
  seconds=$(grep -o 'train finished in [0-9.]*s' "$WORK/$name.log" | grep -o '[0-9.]*')
  accuracy=$(grep -o 'test accuracy there [0-9.]*' "$WORK/$name.log" | grep -o '[0-9.]*$')
  echo "$name seed $seed: records ${size} kB, train ${seconds}s, test accuracy $accuracy"
}

for seed in $SEEDS; do
  run every "$WORK/cora/nodes" 2 all true "$seed"
  run f55 "$WORK/cora/nodes" 2 "[5, 5]" true "$seed"
  run f22 "$WORK/cora/nodes" 2 "[2, 2]" true "$seed"
  run ax-every "$WORK/ax" 1 all false "$seed"
  run ax-f5 "$WORK/ax" 1 "[5]" false "$seed"
  run ax-f2 "$WORK/ax" 1 "[2]" false "$seed"
done
