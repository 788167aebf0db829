#!/usr/bin/env bash
# A full-graph epoch against a record-based epoch on the generated 1M-node graph (BENCHMARKS.md
# section 23), one worker each, back to back: GCN hidden 16. Records: bench/scale.sh's graph
# flattened with fanouts [10, 10] (every node a target), trained 2 epochs with the default cache;
# the second epoch's seconds. Full graph: the same tables, every in-edge, 3 epochs; the median
# epoch's seconds. Both epochs train on the train split and score valid and test. With
# PEER_PYTHON (bench/peer/venv.sh's), DGL's full-graph training of the same GCN
# (bench/peer/dgl_full.py, 3 epochs, its median epoch) runs after them. THREADS: the kernel
# threads of ours (DGL runs one thread).
#
#   bench/full-graph-1m.sh [work_dir]      GRAPH=/tmp/graphflat-scale/g1000000 REPS=1 THREADS=1 PEER_PYTHON=
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-full-1m}
GRAPH=${GRAPH:-/tmp/graphflat-scale/g1000000}
REPS=${REPS:-1}
THREADS=${THREADS:-1}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet
mkdir -p "$WORK"
[ -f "$GRAPH/nodes/_SUCCESS" ] || $BIN generate --out "$GRAPH" --nodes 1000000 --feature-dim 32 --seed 1 > /dev/null
source bench/timing.sh
cat > "$WORK/flatten.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$GRAPH/nodes"
edges = "$GRAPH/edges"
output = "$WORK/flat"
overwrite = true
hops = 2
fanouts = [10, 10]
TOML
[ -f "$WORK/flat/_SUCCESS" ] || timed flatten $BIN run "$WORK/flatten.toml" > /dev/null
for kind in records full; do
  case $kind in
    records) input="records = \"$WORK/flat\""; epochs=2 ;;
    full) input="nodes = \"$GRAPH/nodes\"
edges = \"$GRAPH/edges\""; epochs=3 ;;
  esac
  printf '[cluster]\nworkers = 1\n[train]\n%s\noutput = "%s"\noverwrite = true\nmodel = "gcn"\nhidden = 16\nepochs = %s\nkernel_threads = %s\n' \
    "$input" "$WORK/model-$kind" "$epochs" "$THREADS" > "$WORK/$kind.toml"
done
for _ in $(seq "$REPS"); do
  for kind in records full; do
    read -r S MB <<< "$(timed "$kind" $BIN run "$WORK/$kind.toml")"
    epochs=$(grep -o '"seconds":[0-9.]*' "$WORK/model-$kind/timings.jsonl" | cut -d: -f2 | tr '\n' ' ')
    echo "$kind: whole command ${S}s, peak ${MB} MB; epochs: $epochs"
  done
  if [ -n "${PEER_PYTHON:-}" ]; then
    read -r S MB <<< "$(timed dgl env OMP_NUM_THREADS=1 "$PEER_PYTHON" bench/peer/dgl_full.py "$GRAPH/nodes" "$GRAPH/edges" --epochs 3)"
    echo "dgl: whole command ${S}s, peak ${MB} MB; $(grep -v '^{' "$WORK/dgl.log" | grep -v -i warn | tr '\n' ';')"
    tail -1 "$WORK/dgl.log"
  fi
done
