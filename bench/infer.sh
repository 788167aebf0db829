#!/usr/bin/env bash
# GraphInfer benchmark, one worker, on generated graphs (average degree 10, 32 features, power-law
# in-degrees with a hub above 1% of the nodes), a 2-layer GCN (16 hidden units, 8 classes):
#
# 1. fanouts [10, 10]: GraphInfer against the naive way, GraphFlat's records for every node then
#    a forward pass over every record (graphinfer's forward_records example);
# 2. sampler "all": GraphInfer against DGL's full-graph layer-wise GCN over every in-edge
#    (bench/peer/dgl_infer.py, one thread), on the same Parquet tables.
#
# Wall seconds and peak memory from /usr/bin/time; bytes from du. GraphInfer and DGL run REPS
# times back to back (median reported); the naive way once (it is an order of magnitude slower).
#
#   bench/infer.sh [work_dir]          SIZES="250000 1000000" REPS=3 PEER_PYTHON=/tmp/peer/bin/python
#
# FEATURES="gpu,hdfs" builds with the features CI's build has, so that a tree built by .ci/run
# is not rebuilt without them.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphinfer-bench}
SIZES=${SIZES:-"250000 1000000"}
REPS=${REPS:-3}
PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
cargo build --release --quiet --workspace ${FEATURES:+--features "$FEATURES"} --example forward_records
FORWARD=target/release/examples/forward_records
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"

source bench/timing.sh
mb() { du -sb "$@" | awk '{s+=$1} END {printf "%.0f", s/1e6}'; }

flatten_job() { # graph output
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nhops = 2\nfanouts = [10, 10]\nseed = 1\n' "$1" "$1" "$2"
}
infer_job() { # graph model output
  printf '[cluster]\nworkers = 1\n[infer]\nnodes = "%s/nodes"\nedges = "%s/edges"\nmodel = "%s"\noutput = "%s"\noverwrite = true\n' "$1" "$1" "$2" "$3"
}

for N in $SIZES; do
  G=$WORK/g$N
  if [ ! -f "$G/edges/_SUCCESS" ]; then
    $BIN generate --out "$G" --nodes "$N" --avg-degree 10 --feature-dim 32 --seed 1 | tee "$WORK/generate-$N.log"
  fi
  echo "== $N nodes: $(grep -o 'largest hub: in-degree [0-9]*' "$WORK/generate-$N.log" 2>/dev/null || true); tables $(mb "$G/nodes" "$G/edges") MB"

  flatten_job "$G" "$WORK/flat$N" > "$WORK/flatten-$N.toml"
  read -r FLAT_S FLAT_MB <<< "$(timed flatten-$N $BIN run "$WORK/flatten-$N.toml")"
  # One model serves every size (the same flatten settings): trained once, 1 epoch, on the
  # first size's records; timings do not depend on the weights.
  if [ ! -f "$WORK/model/model.bpk" ]; then
    printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s"\noutput = "%s"\nepochs = 1\nhidden = 16\n' "$WORK/flat$N" "$WORK/model" > "$WORK/train.toml"
    $BIN run "$WORK/train.toml" > "$WORK/train.log" 2>&1
    # The same weights with every in-edge: model.json's sampler says how GraphInfer samples.
    "$PY" bench/all_edges_model.py "$WORK/model" "$WORK/model-all"
  fi
  read -r FWD_S FWD_MB <<< "$(timed forward-$N $FORWARD "$WORK/flat$N" "$WORK/model")"
  RECORDS_MB=$(mb "$WORK/flat$N")

  infer_job "$G" "$WORK/model" "$WORK/scores$N" > "$WORK/infer-$N.toml"
  infer_job "$G" "$WORK/model-all" "$WORK/scores-all$N" > "$WORK/infer-all-$N.toml"
  : > "$WORK/infer-$N.runs"; : > "$WORK/infer-all-$N.runs"; : > "$WORK/dgl-$N.runs"
  for _ in $(seq "$REPS"); do
    timed infer-$N $BIN run "$WORK/infer-$N.toml" >> "$WORK/infer-$N.runs"; echo >> "$WORK/infer-$N.runs"
    timed infer-all-$N $BIN run "$WORK/infer-all-$N.toml" >> "$WORK/infer-all-$N.runs"; echo >> "$WORK/infer-all-$N.runs"
    timed dgl-$N "$PY" bench/peer/dgl_infer.py "$G/nodes" "$G/edges" >> "$WORK/dgl-$N.runs"; echo >> "$WORK/dgl-$N.runs"
  done
  INF_S=$(awk '{print $1}' "$WORK/infer-$N.runs" | median); INF_MB=$(awk '{print $2}' "$WORK/infer-$N.runs" | median)
  ALL_S=$(awk '{print $1}' "$WORK/infer-all-$N.runs" | median); ALL_MB=$(awk '{print $2}' "$WORK/infer-all-$N.runs" | median)
  DGL_S=$(awk '{print $1}' "$WORK/dgl-$N.runs" | median); DGL_MB=$(awk '{print $2}' "$WORK/dgl-$N.runs" | median)
  NAIVE_S=$(echo "$FLAT_S + $FWD_S" | bc)
  echo "naive:      flatten ${FLAT_S}s (${FLAT_MB} MB peak, ${RECORDS_MB} MB of records written and read) + forward ${FWD_S}s (${FWD_MB} MB peak) = ${NAIVE_S}s"
  echo "graphinfer: ${INF_S}s median of $REPS (${INF_MB} MB peak, $(mb "$WORK/scores$N") MB written); naive / graphinfer = $(echo "scale=1; $NAIVE_S / $INF_S" | bc)x"
  grep -h "phases:" "$WORK/infer-$N.log" | sed 's/^ */  last run /'
  echo "all edges:  graphinfer ${ALL_S}s (${ALL_MB} MB peak) vs DGL ${DGL_S}s whole script (${DGL_MB} MB peak); DGL / graphinfer = $(echo "scale=2; $DGL_S / $ALL_S" | bc)x"
  grep -h "phases:" "$WORK/infer-all-$N.log" | sed 's/^ */  last run /'
  grep -h "^dgl:" "$WORK/dgl-$N.log" | sed 's/^/  last run /'
done
