#!/usr/bin/env bash
# The refresh (`incremental = true`, docs/refresh.md) of GraphFlat's records and of GraphInfer's
# scores against a full run over the same day-2 snapshot, same session: a generated graph
# (average degree 10, 32 features), night 1 a full run that keeps the digests (and a 2-layer GCN,
# hidden $HIDDEN (16), trained one epoch on night 1's records), then for each delta (a fraction of the
# edges replaced at random, or concentrated on 1% of the nodes) a refresh over night 1's output
# and a full run, both from the same tables; with WAYS including delta, also a refresh from the
# same change as an edge delta table, over the graph night 1 kept (`keep_graph`). Prints wall
# time, peak RSS and the summary's refresh lines.
# The stage `links` is GraphFlat's link records over the same graph with a split column
# (`split-edges`, 10% valid, 10% test), $LINK_FRACTION (0.01) of the supervision edges as tasks
# and one negative each: day 2 replaces edges by new training edges.
# The stage `pairs` is GraphInfer with a link model (GraphSAGE, hidden $HIDDEN, a `dot` decoder,
# trained one epoch on the link records of a 20k-node graph of the same features) and $PAIRS
# random candidate pairs, scored every night: its refresh reads the unaffected nodes' last
# layer back from night 1's rows and scores every pair again.
#
#   PYTHON=.ci/venv/bin/python STAGES="flatten infer pairs links" WAYS="snapshot delta" HIDDEN=16 \
#     PAIRS=1000000 bench/refresh.sh [nodes] [work_dir]
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000000}
WORK=${2:-/tmp/graphflat-refresh}
WORKERS=${WORKERS:-2}
PYTHON=${PYTHON:-.ci/venv/bin/python}
DELTAS=${DELTAS:-"0.00001 0.0001 0.001 0.01"}
STAGES=${STAGES:-"flatten infer"}
HIDDEN=${HIDDEN:-16}
WAYS=${WAYS:-"snapshot delta"}
PAIRS=${PAIRS:-1000000}
LINK_FRACTION=${LINK_FRACTION:-0.01}
MODEL=$WORK/model-h$HIDDEN
LINK_MODEL=$WORK/link-model-h$HIDDEN
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; commit $(git rev-parse --short HEAD); $WORKERS workers"
if [ ! -f "$WORK/g$NODES/edges/_SUCCESS" ]; then
  $BIN generate --out "$WORK/g$NODES" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
fi

# The graph a job reads: `DIR/nodes` and `DIR/edges`, or with `delta:DIR` the edge delta in
# `DIR/delta/edges` over the kept graph; `keep:DIR` keeps DIR's graph beside the output.
tables() {
  case "$1" in
    delta:*) echo "delta_edges = \"${1#delta:}/delta/edges\"" ;;
    keep:*) printf 'nodes = "%s/nodes"\nedges = "%s/edges"\nkeep_graph = true\n' "${1#keep:}" "${1#keep:}" ;;
    *) printf 'nodes = "%s/nodes"\nedges = "%s/edges"\n' "$1" "$1" ;;
  esac
}

job() { # name data output incremental
  cat > "$WORK/$1.toml" <<TOML
[cluster]
workers = $WORKERS
[flatten]
$(tables "$2")
output = "$3"
hops = 2
fanouts = [10, 5]
seed = 7
overwrite = true
incremental = $4
TOML
}

infer_job() { # name data output incremental
  cat > "$WORK/$1.toml" <<TOML
[cluster]
workers = $WORKERS
[infer]
$(tables "$2")
model = "$MODEL"
output = "$3"
overwrite = true
incremental = $4
TOML
}

link_job() { # name data output incremental
  job "$@"
  printf 'task = "link"\nnegatives = 1\nsupervision_fraction = %s\n' "$LINK_FRACTION" >> "$WORK/$1.toml"
}

pairs_job() { # name data output incremental
  infer_job "$@"
  sed -i "s|^model = .*|model = \"$LINK_MODEL\"|" "$WORK/$1.toml"
  printf 'pairs = "%s/pairs"\npairs_output = "%s-pairs"\n' "$WORK" "$3" >> "$WORK/$1.toml"
}

# A copy of night 1's output `from` (hard links), its digests and its kept graph as `to`, for
# a refresh.
night_copy() { # from to
  for kept in "" graphflat-state graphflat-nodes-a graphflat-edges-a graphflat-nodes-b graphflat-edges-b; do
    local a=$1 b=$2
    [ -n "$kept" ] && a=".$1.$kept" && b=".$2.$kept"
    rm -rf "${WORK:?}/$b"
    if [ -e "$WORK/$a" ]; then cp -al "$WORK/$a" "$WORK/$b"; fi
  done
}

timed() { # name
  /usr/bin/time -f "%e s %M KB" $BIN run "$WORK/$1.toml" > "$WORK/$1.out" 2> "$WORK/$1.err"
  local t; t=$(tail -1 "$WORK/$1.err")
  echo "  $1: $t"
  grep -E "refresh:|parts:|kept graph:" "$WORK/$1.out" | sed 's/^/    /' || true
}

# Day `$day` of one stage: for each way, a refresh over a copy of night 1's output `night`, then
# a full run into `$WORK/$full`; `make` writes the stage's job file.
against_full() { # make night copy name full
  local make=$1 night=$2 copy=$3 name=$4 full=$5
  $make "$full" "$day" "$WORK/$full" false
  for way in $WAYS; do
    night_copy "$night" "$copy"
    $make "$name-$way" "$([ "$way" = delta ] && echo "delta:$day" || echo "$day")" "$WORK/$copy" true
    timed "$name-$way"
  done
  timed "$full"
}

if [[ " $STAGES " == *" flatten "* || " $STAGES " == *" infer "* ]]; then
  job night1 "keep:$WORK/g$NODES" "$WORK/night1" true
  echo "== night 1 (full, keeps the digests)"
  timed night1
fi
if [[ " $STAGES " == *" links "* ]]; then
  if [ ! -f "$WORK/lg$NODES/edges/_SUCCESS" ]; then
    mkdir -p "$WORK/lg$NODES"
    ln -sfn "$WORK/g$NODES/nodes" "$WORK/lg$NODES/nodes"
    $BIN split-edges --edges "$WORK/g$NODES/edges" --out "$WORK/lg$NODES/edges" --valid 0.1 --test 0.1 > /dev/null
  fi
  link_job lnight1 "keep:$WORK/lg$NODES" "$WORK/lnight1" true
  echo "== night 1 of the link records (full, keeps the digests)"
  timed lnight1
fi
if [[ " $STAGES " == *" pairs "* ]]; then
  if [ ! -f "$LINK_MODEL/_SUCCESS" ]; then
    if [ ! -f "$WORK/link-g/split/_SUCCESS" ]; then
      $BIN generate --out "$WORK/link-g" --nodes 20000 --avg-degree 10 --feature-dim 32 --seed 2 > /dev/null
      $BIN split-edges --edges "$WORK/link-g/edges" --out "$WORK/link-g/split" --undirected > /dev/null
    fi
    cat > "$WORK/link-train.toml" <<TOML
[cluster]
workers = $WORKERS
[flatten]
nodes = "$WORK/link-g/nodes"
edges = "$WORK/link-g/split"
output = "$WORK/link-flat"
task = "link"
hops = 2
fanouts = [10, 5]
overwrite = true
[train]
records = "$WORK/link-flat"
output = "$LINK_MODEL"
model = "sage"
hidden = $HIDDEN
embedding_dim = 16
decoder = "dot"
epochs = 1
overwrite = true
TOML
    $BIN run "$WORK/link-train.toml" > "$WORK/link-train.log" 2>&1
  fi
  $PYTHON - "$WORK/pairs" "$NODES" "$PAIRS" <<'PY'
import os, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
out, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(5)
os.makedirs(out, exist_ok=True)
table = pa.table({"src": rng.integers(0, n, k), "dst": rng.integers(0, n, k)})
pq.write_table(table, os.path.join(out, "part-0.parquet"))
PY
  pairs_job pairs1 "keep:$WORK/g$NODES" "$WORK/pairs1-h$HIDDEN" true
  echo "== night 1 of the link model, $PAIRS pairs"
  timed pairs1
fi
if [[ " $STAGES " == *" infer "* ]]; then
  if [ ! -f "$MODEL/_SUCCESS" ]; then
    printf '[cluster]\nworkers = %s\n[train]\nrecords = "%s"\noutput = "%s"\nepochs = 1\nhidden = %s\n' \
      "$WORKERS" "$WORK/night1" "$MODEL" "$HIDDEN" > "$WORK/train.toml"
    $BIN run "$WORK/train.toml" > "$WORK/train.log" 2>&1
  fi
  infer_job scores1 "keep:$WORK/g$NODES" "$WORK/scores1-h$HIDDEN" true
  timed scores1
fi
for how in random concentrated; do
  for d in $DELTAS; do
    [ "$how" = concentrated ] && [ "$d" != 0.0001 ] && continue
    day="$WORK/day2-$how-$d"
    rm -rf "$day"
    $PYTHON bench/refresh_delta.py "$WORK/g$NODES" "$day" "$d" "$how" 3
    echo "== $how, $d of the edges"
    if [[ " $STAGES " == *" flatten "* ]]; then against_full job night1 refreshed refresh full; fi
    if [[ " $STAGES " == *" infer "* ]]; then against_full infer_job "scores1-h$HIDDEN" rescored rescore full-scores; fi
    if [[ " $STAGES " == *" pairs "* ]]; then against_full pairs_job "pairs1-h$HIDDEN" repaired repair full-pairs; fi
    rm -rf "$WORK/full" "$WORK/full-scores" "$WORK/full-pairs" "$WORK/full-pairs-pairs" "$day/edges" "$day/delta"
    if [[ " $STAGES " == *" links "* ]]; then
      day="$WORK/lday2-$how-$d"
      rm -rf "$day"
      $PYTHON bench/refresh_delta.py "$WORK/lg$NODES" "$day" "$d" "$how" 3
      against_full link_job lnight1 lrefreshed lrefresh lfull
      rm -rf "$WORK/lfull" "$day/edges" "$day/delta"
    fi
  done
done
