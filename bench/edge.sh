#!/usr/bin/env bash
# The cost of edge features, one worker / one thread each, on a generated graph (average degree
# 10, 32 node features, 8 edge features, power-law in-degrees) and the same graph with the edge
# table's `features` column dropped (same topology, same node table):
#
# 1. GraphFlat, fanouts [10, 10]: wall seconds, records/s, bytes of records, with and without;
# 2. GraphTrainer, GAT (hidden 16, 4 heads), one epoch on each record set;
# 3. GraphInfer with every in-edge (the same GAT weights, model.json's sampler set to "all")
#    against PyG's full-graph `GATConv` (bench/peer/pyg_gat_infer.py, load + forward), with and
#    without `edge_dim = 8`, REPS times back to back (medians).
#
#   bench/edge.sh [work_dir]          NODES=1000000 REPS=3 PEER_PYTHON=/tmp/peer/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-edge-bench}
NODES=${NODES:-1000000}
REPS=${REPS:-3}
PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD)"

timed() { # NAME CMD...: prints "seconds peak_MB"
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
  awk '{printf "%s %d", $1, $2 / 1024}' "$WORK/$name.time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mb() { du -sb "$@" | awk '{s+=$1} END {printf "%.0f", s/1e6}'; }

G=$WORK/g; P=$WORK/plain
if [ ! -f "$G/edges/_SUCCESS" ]; then
  $BIN generate --out "$G" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --edge-feature-dim 8 --seed 1 > "$WORK/generate.log"
fi
if [ ! -d "$P/edges" ]; then # the same tables without the edge features
  mkdir -p "$P/edges"; ln -sfn "$G/nodes" "$P/nodes"
  "$PY" - "$G/edges" "$P/edges" <<'PY'
import pathlib, sys, pyarrow.parquet as pq
for part in sorted(pathlib.Path(sys.argv[1]).glob("*.parquet")):
    pq.write_table(pq.read_table(part).drop(["features"]), f"{sys.argv[2]}/{part.name}")
PY
fi
echo "tables: nodes $(mb "$G/nodes") MB, edges $(mb "$G/edges") MB with features, $(mb "$P/edges") MB without"

for V in plain g; do
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nhops = 2\nfanouts = [10, 10]\nseed = 1\n' \
    "$WORK/$V" "$WORK/$V" "$WORK/flat-$V" > "$WORK/flatten-$V.toml"
  read -r S M <<< "$(timed flatten-$V $BIN run "$WORK/flatten-$V.toml")"
  echo "flatten $V: ${S}s, $(echo "$NODES / $S" | bc) records/s, peak ${M} MB, records $(mb "$WORK/flat-$V") MB"
  grep -h "phases:" "$WORK/flatten-$V.log" | sed 's/^ */  /' || true

  printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s"\noutput = "%s"\noverwrite = true\nmodel = "gat"\nhidden = 16\nheads = 4\nepochs = 1\n' \
    "$WORK/flat-$V" "$WORK/model-$V" > "$WORK/train-$V.toml"
  read -r S M <<< "$(timed train-$V $BIN run "$WORK/train-$V.toml")"
  python3 - "$WORK/model-$V" "$V" "$S" "$M" <<'PY'
import json, sys
t = json.loads(open(f"{sys.argv[1]}/timings.jsonl").readline())
print(f"train gat {sys.argv[2]}: epoch {t['seconds']:.1f}s ({t['records_per_second']:.0f} records/s, waited {t['wait_seconds']:.1f}s for data); whole command {sys.argv[3]}s, peak {sys.argv[4]} MB")
PY
  "$PY" bench/all_edges_model.py "$WORK/model-$V" "$WORK/model-all-$V"
  printf '[cluster]\nworkers = 1\n[infer]\nnodes = "%s/nodes"\nedges = "%s/edges"\nmodel = "%s"\noutput = "%s"\noverwrite = true\n' \
    "$WORK/$V" "$WORK/$V" "$WORK/model-all-$V" "$WORK/scores-$V" > "$WORK/infer-$V.toml"
done

EDGE_DIM_plain=0; EDGE_DIM_g=8
for V in plain g; do : > "$WORK/infer-$V.runs"; : > "$WORK/pyg-$V.runs"; done
for _ in $(seq "$REPS"); do
  for V in plain g; do
    dim=EDGE_DIM_$V
    { timed infer-$V $BIN run "$WORK/infer-$V.toml"; echo; } >> "$WORK/infer-$V.runs"
    { timed pyg-$V "$PY" bench/peer/pyg_gat_infer.py "$WORK/$V/nodes" "$WORK/$V/edges" --edge-dim "${!dim}"; echo; } >> "$WORK/pyg-$V.runs"
  done
done
for V in plain g; do
  IS=$(awk '{print $1}' "$WORK/infer-$V.runs" | median); IM=$(awk '{print $2}' "$WORK/infer-$V.runs" | median)
  PS=$(awk '{print $1}' "$WORK/pyg-$V.runs" | median); PM=$(awk '{print $2}' "$WORK/pyg-$V.runs" | median)
  echo "infer gat $V: graphinfer ${IS}s (${IM} MB peak), pyg ${PS}s (${PM} MB peak), median of $REPS; pyg / graphinfer = $(echo "scale=2; $PS / $IS" | bc)x"
  grep -h "phases:" "$WORK/infer-$V.log" | sed 's/^ */  last run /' || true
  sed 's/^/  last run /' "$WORK/pyg-$V.log"
done
