#!/usr/bin/env bash
# Issue 10's table in one run: this project against the peer a user would pick instead, back to
# back, one thread each, REPS runs alternating (medians), on the same inputs:
#   1. Cora, every node's full 2-hop record with features, to zstd Parquet: GraphFlat (1 worker)
#      against PyG k_hop_subgraph + pyarrow write_table (bench/peer/pyg_flatten_cora.py);
#   2. 1M nodes, 10M edges, 32 features, fanouts [10, 10], every node: GraphFlat (1 worker, with
#      its Parquet output) against DGL NeighborSampler + feature gather in memory
#      (bench/peer/dgl_sample.py);
#   3. Cora GCN, 200 epochs, evaluating valid and test every epoch: bench/cora-vs-pyg.sh;
#   4. 1M records, GCN hidden 16, one epoch (train, then evaluate valid and test): GraphTrainer
#      with the default cache (streaming) and with a cache that holds everything, against DGL's
#      sampled mini-batch epoch (bench/peer/dgl_train.py);
# then the no-regression rows: GraphFlat at 1M on 2 workers, with and without hub re-indexing.
#
#   bench/peers.sh [work_dir]       REPS=3 ROWS="1 2 3 4 r" PEER_PYTHON=/tmp/peer/bin/python FEATURES=gpu,hdfs
#
# ROWS picks the rows to run (r: the no-regression rows); row 4 reads row 2's records.
#
# The peers' venv: bench/peer/venv.sh. Not part of the tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-peers}
REPS=${REPS:-3}
NODES=${NODES:-1000000}
PY=${PEER_PYTHON:-/tmp/peer/bin/python}
CORA=${CORA:-../shared/data/cora}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(git rev-parse --short HEAD)"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { echo "scale=2; $1 / $2" | bc; }
wall() { /usr/bin/time -f "%e" "$@" 2>&1 > /dev/null | tail -1; } # whole command, seconds
export OMP_NUM_THREADS=1
ROWS=" ${ROWS:-1 2 3 4 r} "
row() { [[ "$ROWS" == *" $1 "* ]]; }

[ -f "$WORK/cora/nodes/_SUCCESS" ] || $BIN import ogb "$CORA" --out "$WORK/cora" > /dev/null 2>&1
[ -f "$WORK/g/edges/_SUCCESS" ] || $BIN generate --out "$WORK/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null 2>&1
flatten_job() { # name nodes_dir edges_dir workers hub_threshold sampler-lines
  cat > "$WORK/$1.toml" <<TOML
[cluster]
workers = $4
[flatten]
nodes = "$2"
edges = "$3"
output = "$WORK/out-$1"
overwrite = true
hops = 2
hub_threshold = $5
$6
TOML
}

if row 1; then
echo "== 1. Cora full 2-hop records to zstd Parquet"
flatten_job cora "$WORK/cora/nodes" "$WORK/cora/edges" 1 100000 'sampler = "all"'
: > "$WORK/cora.ours"; : > "$WORK/cora.peer"
for _ in $(seq "$REPS"); do
  wall $BIN run "$WORK/cora.toml" >> "$WORK/cora.ours"
  "$PY" bench/peer/pyg_flatten_cora.py "$CORA" "$WORK/pyg-cora.parquet" 2> /dev/null | tee "$WORK/cora.peer.log"
  grep -o "total [0-9.]*s" "$WORK/cora.peer.log" | grep -o "[0-9.]*" >> "$WORK/cora.peer"
done
OURS=$(median < "$WORK/cora.ours"); PEER=$(median < "$WORK/cora.peer")
OUT=$(du -cb "$WORK"/out-cora/*.parquet | tail -1 | cut -f1)
echo "graphflat ${OURS}s (whole command), output $(echo "scale=2; $OUT / 1000000" | bc) MB; PyG ${PEER}s (subgraphs + write only)" \
  "-> graphflat is $(ratio "$PEER" "$OURS")x faster"

fi

flatten_job w1 "$WORK/g/nodes" "$WORK/g/edges" 1 100000 'fanouts = [10, 10]'
if row 2; then
echo "== 2. ${NODES} nodes, fanouts [10, 10], every node"
: > "$WORK/w1.ours"; : > "$WORK/w1.peer"
for _ in $(seq "$REPS"); do
  wall $BIN run "$WORK/w1.toml" >> "$WORK/w1.ours"
  "$PY" bench/peer/dgl_sample.py "$WORK/g/nodes" "$WORK/g/edges" 2> /dev/null | tee "$WORK/w1.peer.log"
  grep -o "gather [0-9.]*s" "$WORK/w1.peer.log" | grep -o "[0-9.]*" >> "$WORK/w1.peer"
done
OURS=$(median < "$WORK/w1.ours"); PEER=$(median < "$WORK/w1.peer")
echo "graphflat ${OURS}s = $(echo "$NODES / $OURS / 1000" | bc)k records/s (whole command, $(du -sh "$WORK/out-w1" | cut -f1) written);" \
  "DGL ${PEER}s = $(echo "$NODES / $PEER / 1000" | bc)k targets/s (sampling + gather only) -> graphflat takes $(ratio "$OURS" "$PEER")x DGL's time"

fi

if row 3; then
echo "== 3. Cora GCN, 200 epochs"
REPS=$REPS PEER_PYTHON=$PY bench/cora-vs-pyg.sh "$WORK/cora-train" | grep -v INFO

fi

if row 4; then
[ -f "$WORK/out-w1/_SUCCESS" ] || $BIN run "$WORK/w1.toml" > /dev/null 2>&1
echo "== 4. ${NODES} records, GCN hidden 16, one epoch"
train_job() { # name cache_mb
  cat > "$WORK/$1.toml" <<TOML
[cluster]
workers = 1
[train]
records = "$WORK/out-w1"
output = "$WORK/model-$1"
overwrite = true
model = "gcn"
hidden = 16
epochs = 2
batch_size = 1024
cache_mb = $2
kernel_threads = 1
TOML
}
epoch() { python3 -c "import json,sys; r=[json.loads(l)['seconds'] for l in open(sys.argv[1])]; print(r[-1])" "$WORK/model-$1/timings.jsonl"; }
train_job streaming 512; train_job cached 16384
: > "$WORK/streaming"; : > "$WORK/cached"; : > "$WORK/dgl-train"
for _ in $(seq "$REPS"); do
  $BIN run "$WORK/streaming.toml" > /dev/null 2>&1; epoch streaming >> "$WORK/streaming"
  $BIN run "$WORK/cached.toml" > /dev/null 2>&1; epoch cached >> "$WORK/cached"
  "$PY" bench/peer/dgl_train.py "$WORK/g/nodes" "$WORK/g/edges" 2> /dev/null | tee "$WORK/dgl-train.log"
  grep -o "epoch [0-9.]*s" "$WORK/dgl-train.log" | grep -o "[0-9.]*" >> "$WORK/dgl-train"
done
S=$(median < "$WORK/streaming"); C=$(median < "$WORK/cached"); D=$(median < "$WORK/dgl-train")
echo "graphtrainer second epoch: streaming (cache_mb 512) ${S}s, all cached ${C}s; DGL ${D}s" \
  "-> graphtrainer is $(ratio "$D" "$S")x faster streaming, $(ratio "$D" "$C")x cached"

fi

if row r; then
echo "== no-regression rows: ${NODES} nodes on 2 workers"
flatten_job w2 "$WORK/g/nodes" "$WORK/g/edges" 2 100000 'fanouts = [10, 10]'
flatten_job w2-noreindex "$WORK/g/nodes" "$WORK/g/edges" 2 0 'fanouts = [10, 10]'
for name in w2 w2-noreindex; do
  : > "$WORK/$name.ours"
  for _ in $(seq "$REPS"); do wall $BIN run "$WORK/$name.toml" >> "$WORK/$name.ours"; done
  echo "$name: median $(median < "$WORK/$name.ours")s ($(tr '\n' ' ' < "$WORK/$name.ours"))"
done
fi
