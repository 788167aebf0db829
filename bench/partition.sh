#!/usr/bin/env bash
# Issue 53's partition table: `[partition]` against METIS (pymetis, its default k-way scheme) on
# Cora and on the generated 1M-node graph (10M edges), at 2 and 8 parts: edges cut, largest part
# against the mean, and seconds. One run each, back to back on the same inputs; GraphFlat's time
# is the whole command (reading the tables, writing the output), METIS's the part_graph call
# alone (bench/peer/metis_cut.py builds its CSR first). The hash owner's cut is the summary's.
#
#   bench/partition.sh [work_dir]      PEER_PYTHON=/tmp/probe-venv/bin/python WORKERS="1 2"
#
# PEER_PYTHON needs numpy, pyarrow and pymetis. Not part of the tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-partition}
PY=${PEER_PYTHON:-/tmp/probe-venv/bin/python}
WORKERS=${WORKERS:-"1 2"}
CORA=${CORA:-../shared/data/cora}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(git rev-parse --short HEAD)"
[ -e "$WORK/cora/nodes/_SUCCESS" ] || "$BIN" import ogb "$CORA" --out "$WORK/cora" > /dev/null 2>&1
[ -e "$WORK/g1m/nodes/_SUCCESS" ] ||
  "$BIN" generate --out "$WORK/g1m" --nodes 1000000 --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null 2>&1
echo "| graph | parts | workers | cut | hash's cut | largest/mean | seconds | METIS cut | METIS largest/mean | METIS seconds |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for graph in cora g1m; do
  for parts in 2 8; do
    metis=$("$PY" -W ignore bench/peer/metis_cut.py "$WORK/$graph/nodes" "$WORK/$graph/edges" "$parts")
    for workers in $WORKERS; do
      out="$WORK/$graph-$parts-$workers"
      printf '[cluster]\nworkers = %s\n[partition]\nnodes = "%s"\nedges = "%s"\noutput = "%s"\nparts = %s\noverwrite = true\n' \
        "$workers" "$WORK/$graph/nodes" "$WORK/$graph/edges" "$out" "$parts" > "$out.toml"
      start=$(date +%s.%N)
      summary=$("$BIN" run "$out.toml" 2> /dev/null)
      seconds=$(echo "$(date +%s.%N) - $start" | bc)
      cut=$(echo "$summary" | sed -n 's/.*edge cut: *\([0-9.]*%\).*hash owner cuts \([0-9.]*%\).*/\1 | \2/p')
      balance=$(echo "$summary" | sed -n 's/.*largest part \([0-9.]*\) x.*/\1/p')
      echo "$metis" | "$PY" -c "
import json, sys
m = json.load(sys.stdin)
print(f'| $graph | $parts | $workers | $cut | $balance | {float($seconds):.2f} | {100 * m[\"metis_cut\"]:.2f}% | {m[\"metis_balance\"]:.4f} | {m[\"metis_seconds\"]:.2f} |')"
    done
  done
done
