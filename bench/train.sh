#!/usr/bin/env bash
# GraphTrainer benchmark: epoch time and records/s for GCN on Cora and on the generated graph
# (records from bench/flatten.sh's graph, fanouts [10, 10]), 1 and 2 workers; compute's wait for
# data with and without pipelining; time with and without pruning; the edge-partitioned
# aggregation kernel (the default on the CPU) against the gather/scatter reference.
#
#   bench/train.sh [work_dir] [nodes]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-train-bench}
NODES=${2:-200000}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"

# Records: Cora (every edge, k = 2) and a generated graph (fanouts [10, 10]).
[ -f "$WORK/cora/edges/_SUCCESS" ] || $BIN import ogb ../shared/data/cora --out "$WORK/cora" > /dev/null
[ -f "$WORK/g/edges/_SUCCESS" ] || $BIN generate --out "$WORK/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
cat > "$WORK/flatten.toml" <<TOML
[flatten]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/cora-flat"
hops = 2
sampler = "all"
TOML
[ -f "$WORK/cora-flat/_SUCCESS" ] || $BIN run "$WORK/flatten.toml" > /dev/null 2>&1
cat > "$WORK/flatten-g.toml" <<TOML
[flatten]
nodes = "$WORK/g/nodes"
edges = "$WORK/g/edges"
output = "$WORK/g-flat"
hops = 2
fanouts = [10, 10]
TOML
[ -f "$WORK/g-flat/_SUCCESS" ] || $BIN run "$WORK/flatten-g.toml" > /dev/null 2>&1

run() { # name records workers epochs extra
  local name=$1 records=$2 workers=$3 epochs=$4 extra=$5
  cat > "$WORK/$name.toml" <<TOML
[train]
records = "$WORK/$records"
output = "$WORK/model-$name"
model = "gcn"
hidden = 16
epochs = $epochs
$extra
TOML
  rm -rf "$WORK/model-$name"
  $BIN run "$WORK/$name.toml" --workers "$workers" > /dev/null 2>&1
  python3 - "$WORK/model-$name/timings.jsonl" "$name" "$workers" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
metrics = [json.loads(l) for l in open(sys.argv[1].replace("timings.jsonl", "metrics.jsonl"))]
mid = lambda xs: sorted(xs)[len(xs) // 2]
print(f"{sys.argv[2]:28s} workers {sys.argv[3]}: median epoch {mid([r['seconds'] for r in rows]):.3f}s, "
      f"{mid([r['records_per_second'] for r in rows]):.0f} train records/s, "
      f"waited {mid([r['wait_seconds'] for r in rows]):.4f}s/epoch for data, "
      f"test {metrics[-1]['test_accuracy']:.3f}")
PY
}

for workers in 1 2; do
  run cora cora-flat $workers 50 "normalize_features = true"
done
run cora-no-prefetch cora-flat 1 50 "normalize_features = true
prefetch = 0"
run cora-no-prune cora-flat 1 50 "normalize_features = true
prune = false"
run cora-reference-aggregation cora-flat 1 50 "normalize_features = true
aggregation = \"reference\""
for workers in 1 2; do
  run generated g-flat $workers 3 "batch_size = 1024"
done
run generated-no-prefetch g-flat 1 3 "batch_size = 1024
prefetch = 0"
run generated-no-prune g-flat 1 3 "batch_size = 1024
prune = false"
run generated-reference-aggr g-flat 1 3 "batch_size = 1024
aggregation = \"reference\""
