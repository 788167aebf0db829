#!/usr/bin/env bash
# Cost per edge as the graph grows (BENCHMARKS.md section 17): GraphInfer over every in-edge
# (2-layer GCN, 16 hidden units, 8 classes), one worker, on generated graphs of SIZES nodes
# (average degree 10, 32 features, seed 1), REPS runs per size; then the largest size on 2
# workers once. With BEFORE=/path/to/graphflat, that binary (an older commit's build) runs too,
# alternating with this tree's, for a same-session A/B.
#
#   bench/scale.sh [work_dir]          SIZES="1000000 10000000" REPS=3 BEFORE=/tmp/graphflat-old PAUSE=10
#
# Prints, per run, wall seconds and peak MB (from /usr/bin/time), and the job's phases; per
# size, the median and the seconds per million edges. 10M nodes need about 8 GB of memory and
# 2.2 GB of disk for the tables. FEATURES="gpu,hdfs" builds with CI's features; BIN=/path runs
# that binary instead of building this tree. PEER=1 runs DGL's load + forward over every in-edge
# (bench/peer/dgl_infer.py, one thread) after each of this tree's runs, on the same tables, and
# prints its median and the ratio (DGL needs about 1.4 KB per edge: 5.7 GB at 4M nodes).
# PAUSE=seconds sleeps before each of this project's runs: on a virtual machine whose free
# memory goes back to the host within seconds, a job started at once reuses the memory the
# last one freed (paged in several times faster), and a small job fits in it where a large one
# does not; with a pause every job pages in memory alike (BENCHMARKS.md, section 17).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-scale}
SIZES=${SIZES:-"1000000 10000000"}
REPS=${REPS:-3}
PAUSE=${PAUSE:-0}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
  BIN=$PWD/target/release/graphflat
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD)"

source bench/timing.sh
[ -n "${PEER:-}" ] && PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}

infer_job() { # workers graph model output
  printf '[cluster]\nworkers = %s\n[infer]\nnodes = "%s/nodes"\nedges = "%s/edges"\nmodel = "%s"\noutput = "%s"\noverwrite = true\n' "$1" "$2" "$2" "$3" "$4"
}

source bench/model_all.sh
all_edges_model "$WORK" "$BIN"

builds="this"
[ -n "${BEFORE:-}" ] && builds="before this"
binary() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$BIN"; fi; }

LARGEST=""
for N in $SIZES; do
  G=$WORK/g$N
  if [ ! -f "$G/edges/_SUCCESS" ]; then
    $BIN generate --out "$G" --nodes "$N" --avg-degree 10 --feature-dim 32 --seed 1 | tail -1
  fi
  infer_job 1 "$G" "$WORK/model-all" "$WORK/scores$N" > "$WORK/infer-$N.toml"
  for b in $builds; do : > "$WORK/$b-$N.runs"; done
  : > "$WORK/dgl-$N.runs"
  for r in $(seq "$REPS"); do
    for b in $builds; do
      sleep "$PAUSE"
      read -r S MB <<< "$(timed "$b-$N-$r" "$(binary "$b")" run "$WORK/infer-$N.toml")"
      echo "$S $MB" >> "$WORK/$b-$N.runs"
      echo "$N nodes, $b, run $r: ${S}s, ${MB} MB peak;$(grep -h "phases:" "$WORK/$b-$N-$r.log" | sed 's/^ *phases: */ /')"
    done
    if [ -n "${PEER:-}" ]; then
      read -r S MB <<< "$(timed "dgl-$N-$r" "$PY" bench/peer/dgl_infer.py "$G/nodes" "$G/edges")"
      # DGL's load + forward, as its script reports them (its whole script adds Python's start).
      LF=$(grep -h "^dgl:" "$WORK/dgl-$N-$r.log" | sed -E 's/.*load ([0-9.]+)s, forward ([0-9.]+)s.*/\1 + \2/' | bc)
      echo "$LF $MB $S" >> "$WORK/dgl-$N.runs"
      echo "$N nodes, DGL, run $r: load + forward ${LF}s, whole script ${S}s, ${MB} MB peak"
    fi
  done
  for b in $builds; do
    S=$(awk '{print $1}' "$WORK/$b-$N.runs" | median)
    echo "== $N nodes, $b: median ${S}s; $(echo "scale=3; $S / ($N * 10 / 1000000)" | bc) s per million edges"
  done
  if [ -n "${PEER:-}" ]; then
    LF=$(awk '{print $1}' "$WORK/dgl-$N.runs" | median); MB=$(awk '{print $2}' "$WORK/dgl-$N.runs" | median)
    S=$(awk '{print $1}' "$WORK/this-$N.runs" | median); OURS_MB=$(awk '{print $2}' "$WORK/this-$N.runs" | median)
    echo "== $N nodes, DGL: load + forward median ${LF}s, ${MB} MB peak; DGL / this = $(echo "scale=2; $LF / $S" | bc)x, memory $(echo "scale=2; $OURS_MB / $MB" | bc)x DGL's"
  fi
  LARGEST=$N
done

G=$WORK/g$LARGEST
infer_job 2 "$G" "$WORK/model-all" "$WORK/scores2-$LARGEST" > "$WORK/infer2-$LARGEST.toml"
sleep "$PAUSE"
read -r S MB <<< "$(timed "two-$LARGEST" "$BIN" run "$WORK/infer2-$LARGEST.toml")"
echo "== $LARGEST nodes, 2 workers: ${S}s, ${MB} MB peak;$(grep -h "phases:" "$WORK/two-$LARGEST.log" | sed 's/^ *phases: */ /')"
