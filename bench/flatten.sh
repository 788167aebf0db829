#!/usr/bin/env bash
# GraphFlat benchmark: generates a power-law graph (default 1M nodes, 10M edges, 32 features,
# largest hub ~240k in-edges) and flattens it with fanouts [10, 10]:
#   1 worker, 2 workers, 2 workers with re-indexing off, and half the targets (memory vs output);
# then the Cora full 2-hop job (if ../shared/data/cora exists), 5 runs each on 1 and 2 workers.
# Results go to stdout; BENCHMARKS.md records them.
#
#   bench/flatten.sh [nodes] [work_dir]        (MODE=throughput|balance|cora runs one part)
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000000}
WORK=${2:-/tmp/graphflat-bench}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)"
if [ ! -f "$WORK/g$NODES/edges/_SUCCESS" ]; then
  $BIN generate --out "$WORK/g$NODES" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1
fi

run() { # name workers hub_threshold targets
  local name=$1 workers=$2 hub=$3 targets=$4
  cat > "$WORK/$name.toml" <<TOML
[cluster]
workers = $workers
[flatten]
nodes = "$WORK/g$NODES/nodes"
edges = "$WORK/g$NODES/edges"
output = "$WORK/out-$name"
hops = 2
fanouts = [10, 10]
sampler = "uniform"
hub_threshold = $hub
targets = $targets
TOML
  echo "== $name: $workers workers, hub_threshold $hub, targets $targets"
  /usr/bin/time -f "  wall %e s, max RSS %M KB" $BIN run "$WORK/$name.toml" 2> "$WORK/$name.log" | grep -vE "output:"
  grep "max RSS" "$WORK/$name.log"
  rm -rf "$WORK/out-$name"
}

MODE=${MODE:-all}
if [ "$MODE" = all ] || [ "$MODE" = throughput ]; then
  run w1 1 100000 '"all"'
  run w2 2 100000 '"all"'
  run w2-noreindex 2 0 '"all"'
  run w1-half 1 100000 '["train"]'
fi

# Reducer balance: how many in-edges the busiest sampling reducer takes in, over the mean, with
# many workers (a count, so meaningful even with more workers than cores). Few targets keep it
# short; the sampling phase always sees every edge.
if [ "$MODE" = all ] || [ "$MODE" = balance ]; then
  for workers in 16 64; do
    for hub in 100000 10000 0; do
      run "balance-w$workers-hub$hub" $workers $hub '["valid"]' | grep -E "^==|graph:"
    done
  done
fi

CORA=../shared/data/cora
if [ -f "$CORA/raw/edge.csv.gz" ] && { [ "$MODE" = all ] || [ "$MODE" = cora ]; }; then
  [ -f "$WORK/cora/edges/_SUCCESS" ] || $BIN import ogb "$CORA" --out "$WORK/cora" > /dev/null
  for workers in 1 2; do
    cat > "$WORK/cora$workers.toml" <<TOML
[cluster]
workers = $workers
[flatten]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/out-cora"
hops = 2
sampler = "all"
TOML
    echo "== cora full 2-hop, $workers workers, 5 runs (wall seconds, whole command)"
    for i in 1 2 3 4 5; do
      /usr/bin/time -f "%e" $BIN run "$WORK/cora$workers.toml" 2>&1 >/dev/null | tail -1
    done | sort -n | tr '\n' ' '
    echo
  done
  $BIN run "$WORK/cora1.toml" 2>/dev/null | grep -E "record nodes|written"
fi
