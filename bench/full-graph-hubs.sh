#!/usr/bin/env bash
# Split hubs in full-graph training (BENCHMARKS.md section 23): the generated 1M-node graph
# (its largest in-degrees 241k, 149k, 109k, 87k, 72k), GCN hidden 16, 3 epochs, with hubs
# whole (hub_threshold = 0) and split at 100000 (the default) and at 10000. For each worker
# count in WORKERS: the most edges one worker sums a layer against the mean (from the run's
# log: the slowest worker sets an epoch's pace, whatever the machine), the median epoch's
# seconds and the whole command's. On a machine with fewer cores than workers the seconds
# measure the total work, not the balance.
#
#   bench/full-graph-hubs.sh [work_dir]      GRAPH=/tmp/graphflat-scale/g1000000 WORKERS="2 16"
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-full-hubs}
GRAPH=${GRAPH:-/tmp/graphflat-scale/g1000000}
WORKERS=${WORKERS:-2 16}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet
mkdir -p "$WORK"
[ -f "$GRAPH/nodes/_SUCCESS" ] || $BIN generate --out "$GRAPH" --nodes 1000000 --feature-dim 32 --seed 1 > /dev/null
source bench/timing.sh
for workers in $WORKERS; do
  for threshold in 0 100000 10000; do
    name="w$workers-h$threshold"
    printf '[cluster]\nworkers = %s\n[train]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nmodel = "gcn"\nhidden = 16\nepochs = 3\nkernel_threads = 1\nhub_threshold = %s\n' \
      "$workers" "$GRAPH" "$GRAPH" "$WORK/model-$name" "$threshold" > "$WORK/$name.toml"
    read -r S MB <<< "$(timed "$name" $BIN run "$WORK/$name.toml")"
    balance=$(grep -o 'the most edges a worker sums: [0-9]* ([0-9.]*x the mean)' "$WORK/$name.log" | sed 's/the most edges a worker sums: //')
    hubs=$(grep -o '[0-9]* hubs split into [0-9]* runs' "$WORK/$name.log" || echo "no hub split")
    epochs=$(grep -o '"seconds":[0-9.]*' "$WORK/model-$name/timings.jsonl" | cut -d: -f2 | median)
    echo "workers $workers, hub_threshold $threshold: $hubs; largest worker $balance; median epoch ${epochs}s; whole ${S}s, peak ${MB} MB"
  done
done
