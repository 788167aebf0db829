#!/usr/bin/env bash
# GraphTrainer against PyG on Cora, back to back, one thread each: a 2-layer GCN with Kipf &
# Welling's settings for 200 epochs, evaluating valid and test every epoch. GraphTrainer trains
# on Cora's flattened records (every in-edge, k = 2) on one worker; PyG runs full-batch
# (bench/peer/pyg_cora.py) on the same OGB raw files. Prints each run and the medians' ratio.
#
#   bench/cora-vs-pyg.sh [work_dir]      REPS=3 PEER_PYTHON=/tmp/peer/bin/python FEATURES=gpu,hdfs
#
# The peer needs torch and torch_geometric: bench/peer/venv.sh (torch 2.2.1, DGL 2.1.0, PyG 2.8).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-cora-pyg}
REPS=${REPS:-3}
PY=${PEER_PYTHON:-/tmp/peer/bin/python}
CORA=${CORA:-../shared/data/cora}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
[ -f "$WORK/cora/nodes/_SUCCESS" ] || $BIN import ogb "$CORA" --out "$WORK/cora" > /dev/null 2>&1
cat > "$WORK/job.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/flat"
overwrite = true
sampler = "all"
[train]
records = "$WORK/flat"
output = "$WORK/model"
overwrite = true
model = "gcn"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4
epochs = 200
batch_size = 140
normalize_features = true
cache_mb = 1024
kernel_threads = 1
TOML
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: > "$WORK/ours"; : > "$WORK/pyg"
for _ in $(seq "$REPS"); do
  $BIN run "$WORK/job.toml" > "$WORK/ours.log" 2>&1
  grep -o "train finished in [0-9.]*s" "$WORK/ours.log" | grep -o "[0-9.]*" | tee -a "$WORK/ours" | sed 's/^/graphtrainer: 200 epochs in /'
  "$PY" bench/peer/pyg_cora.py "$CORA" 2> /dev/null | tee "$WORK/pyg.log"
  grep -o "200 epochs [0-9.]*s" "$WORK/pyg.log" | grep -o "[0-9.]*s$" | tr -d s >> "$WORK/pyg"
done
OURS=$(median < "$WORK/ours"); PYG=$(median < "$WORK/pyg")
grep -h "test accuracy there\|epoch 200/" "$WORK/ours.log" | tail -2
echo "medians: graphtrainer ${OURS}s, PyG ${PYG}s; graphtrainer / PyG = $(echo "scale=2; $OURS / $PYG" | bc)x"
