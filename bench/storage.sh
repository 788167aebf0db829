#!/usr/bin/env bash
# GraphFlat and GraphTrainer with input and output on a local S3 server against local disk, on
# 1, 2 and 4 processes of one worker each (loopback, scripts/launch-local.sh): wall time of the
# whole job and peak RSS of every process.
#
# The S3 server is moto's moto_server (the one the tests use; `.ci/run` installs it into
# .ci/venv), started here on 127.0.0.1 with its in-memory backend. It is one Python process
# and holds every object in memory, so it measures the object_store path (ranged GETs,
# multipart PUTs, the conditional marker), not what AWS or MinIO would sustain.
#
#   bench/storage.sh [work_dir] [nodes]        PROCS="1 2 4" EPOCHS=1 FEATURES=gpu,hdfs
#
# FEATURES builds with the features CI's build has, so that a tree .ci/run built is not rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-storage}
NODES=${2:-1000000}
PROCS=${PROCS:-"1 2 4"}
EPOCHS=${EPOCHS:-1}
BIN=$PWD/target/release/graphflat
MOTO=${GRAPHFLAT_MOTO_SERVER:-$PWD/.ci/venv/bin/moto_server}
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
[ -x "$MOTO" ] || { echo "no moto_server at $MOTO: run .ci/run once, or set GRAPHFLAT_MOTO_SERVER" >&2; exit 66; }
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"

PORT=${PORT:-9561}
source bench/moto.sh
start_moto "$PORT" "$WORK/moto.log"

G=$WORK/g$NODES
[ -f "$G/edges/_SUCCESS" ] || $BIN generate --out "$G" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
# The same tables on S3, written by the same command.
$BIN generate --out "s3://bench/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null

# run NAME PROCESSES JOB: the job on that many processes; prints wall seconds and each
# process's peak RSS in MB.
run() {
  local name=$1 procs=$2 job=$3 start end
  rm -rf "${WORK:?}/$name"; start=$(date +%s.%N)
  GRAPHFLAT="$PWD/bench/rss.sh" RSS_DIR="$WORK/$name" scripts/launch-local.sh "$procs" "$job" --workers 1 \
    > "$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log"; exit 1; }
  end=$(date +%s.%N)
  printf '%-24s %7.1f s   peak MB per process: %s\n' "$name" "$(echo "$end - $start" | bc)" \
    "$(cat "$WORK/$name"/*.rss | sort -n | tr '\n' ' ')"
}

for where in local s3; do
  if [ $where = local ]; then IN=$G OUT=$WORK/out; else IN=s3://bench/g OUT=s3://bench/out; fi
  for p in $PROCS; do
    cat > "$WORK/flatten-$where-$p.toml" <<TOML
[flatten]
nodes = "$IN/nodes"
edges = "$IN/edges"
output = "$OUT/flat$p"
overwrite = true
hops = 2
fanouts = [10, 10]
TOML
    cat > "$WORK/train-$where-$p.toml" <<TOML
[train]
records = "$OUT/flat$p"
output = "$OUT/model$p"
overwrite = true
model = "gcn"
hidden = 16
epochs = $EPOCHS
batch_size = 1024
TOML
    run "flatten-$where-$p" "$p" "$WORK/flatten-$where-$p.toml"
    run "train-$where-$p" "$p" "$WORK/train-$where-$p.toml"
    grep -ho "first step [0-9.]*s" "$WORK/train-$where-$p.log" | head -1 | sed 's/^/  train: /'
  done
done
