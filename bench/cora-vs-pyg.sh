#!/usr/bin/env bash
# GraphTrainer against PyG on Cora, back to back, one thread each: a 2-layer GCN with Kipf &
# Welling's settings for 200 epochs, evaluating valid and test every epoch. GraphTrainer trains
# on Cora's flattened records (every in-edge, k = 2) on one worker; PyG runs full-batch
# (bench/peer/pyg_cora.py) on the same OGB raw files. Prints each run and the medians' ratios:
# the training loops (ours: "train finished in", PyG: its 200 epochs), and the whole commands
# (ours: `graphflat run`, flatten included; PyG: its script, interpreter start, imports and load
# included).
#
# With FULL=1 ours trains on the graph itself (full-graph training: [train] nodes and edges, no
# flatten, no records), the whole command being `graphflat run` of that job.
#
#   bench/cora-vs-pyg.sh [work_dir]      REPS=3 PEER_PYTHON=/tmp/peer/bin/python FEATURES=gpu,hdfs FULL=1
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
if [ "${FULL:-0}" = 1 ]; then
  cat > "$WORK/job.toml" <<TOML
[cluster]
workers = 1
[train]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/model"
overwrite = true
layers = 2
model = "gcn"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4
epochs = 200
normalize_features = true
kernel_threads = 1
TOML
else
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
fi
source bench/timing.sh
: > "$WORK/ours"; : > "$WORK/pyg"; : > "$WORK/ours-whole"; : > "$WORK/pyg-whole"
for _ in $(seq "$REPS"); do
  timed ours $BIN run "$WORK/job.toml" | cut -d' ' -f1 | tee -a "$WORK/ours-whole" | sed 's/^/graphflat run, whole command: /'
  grep -o "train finished in [0-9.]*s" "$WORK/ours.log" | grep -o "[0-9.]*" | tee -a "$WORK/ours" | sed 's/^/graphtrainer: 200 epochs in /'
  timed pyg "$PY" bench/peer/pyg_cora.py "$CORA" | cut -d' ' -f1 | tee -a "$WORK/pyg-whole" | sed 's/^/pyg_cora.py, whole command: /'
  grep -v "^Warning\|warn" "$WORK/pyg.log" | tail -1
  grep -o "200 epochs [0-9.]*s" "$WORK/pyg.log" | grep -o "[0-9.]*s$" | tr -d s >> "$WORK/pyg"
done
OURS=$(median < "$WORK/ours"); PYG=$(median < "$WORK/pyg")
OURS_WHOLE=$(median < "$WORK/ours-whole"); PYG_WHOLE=$(median < "$WORK/pyg-whole")
grep -h "test accuracy there\|epoch 200/" "$WORK/ours.log" | tail -2
echo "medians, training loops: graphtrainer ${OURS}s, PyG ${PYG}s; graphtrainer / PyG = $(echo "scale=2; $OURS / $PYG" | bc)x"
echo "medians, whole commands: graphflat run ${OURS_WHOLE}s, PyG's script ${PYG_WHOLE}s; ratio = $(echo "scale=2; $OURS_WHOLE / $PYG_WHOLE" | bc)x"
