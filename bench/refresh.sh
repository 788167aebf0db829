#!/usr/bin/env bash
# GraphFlat's refresh (`incremental = true`, docs/refresh.md) against a full run over the same
# day-2 snapshot, same session: a generated graph (average degree 10, 32 features), night 1 a
# full run that keeps the digests, then for each delta (a fraction of the edges replaced at
# random, or concentrated on 1% of the nodes) a refresh over night 1's output and a full run,
# both from the same tables. Prints wall time, peak RSS and the summary's refresh lines.
#
#   PYTHON=.ci/venv/bin/python bench/refresh.sh [nodes] [work_dir]
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-1000000}
WORK=${2:-/tmp/graphflat-refresh}
WORKERS=${WORKERS:-2}
PYTHON=${PYTHON:-.ci/venv/bin/python}
DELTAS=${DELTAS:-"0.00001 0.0001 0.001 0.01"}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; commit $(git rev-parse --short HEAD); $WORKERS workers"
if [ ! -f "$WORK/g$NODES/edges/_SUCCESS" ]; then
  $BIN generate --out "$WORK/g$NODES" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
fi

job() { # name data output incremental
  cat > "$WORK/$1.toml" <<TOML
[cluster]
workers = $WORKERS
[flatten]
nodes = "$2/nodes"
edges = "$2/edges"
output = "$3"
hops = 2
fanouts = [10, 5]
seed = 7
overwrite = true
incremental = $4
TOML
}

timed() { # name
  /usr/bin/time -f "%e s %M KB" $BIN run "$WORK/$1.toml" > "$WORK/$1.out" 2> "$WORK/$1.err"
  local t; t=$(tail -1 "$WORK/$1.err")
  echo "  $1: $t"
  grep -E "refresh:|parts:" "$WORK/$1.out" | sed 's/^/    /' || true
}

job night1 "$WORK/g$NODES" "$WORK/night1" true
echo "== night 1 (full, keeps the digests)"
timed night1
for how in random concentrated; do
  for d in $DELTAS; do
    [ "$how" = concentrated ] && [ "$d" != 0.0001 ] && continue
    day="$WORK/day2-$how-$d"
    rm -rf "$day"
    $PYTHON bench/refresh_delta.py "$WORK/g$NODES" "$day" "$d" "$how" 3
    rm -rf "$WORK/refreshed" "$WORK/.refreshed.graphflat-state"
    cp -al "$WORK/night1" "$WORK/refreshed"
    cp -al "$WORK/.night1.graphflat-state" "$WORK/.refreshed.graphflat-state"
    job refresh "$day" "$WORK/refreshed" true
    job full "$day" "$WORK/full" false
    echo "== $how, $d of the edges"
    timed refresh
    timed full
    rm -rf "$WORK/full" "$day/edges"
  done
done
