#!/usr/bin/env bash
# How a run's parts wait for the commit on S3 (BENCHMARKS section 18): `[storage] staging =
# "multipart"` (each part a multipart upload to its own key, completed at the commit) against
# "copy" (each part written whole under _temporary/ and copied into place at the commit), for
# the 1M flatten (one worker, fanouts [10, 10]) from local tables to a local moto_server,
# each run overwriting the one before: the whole command and the commit's switch (from the
# first part published to the last part of the replaced run removed), alternating, REPS each.
#
# moto is one Python process holding every object in memory: its copy is a memory copy, where
# AWS copies server-side at some hundreds of MB/s per object; its completion concatenates the
# parts. So the ratio here understates what a copy costs on AWS, not what it saves.
#
#   bench/s3-staging.sh [work_dir] [nodes]        REPS=2 FEATURES=gpu,hdfs
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-s3-staging}
NODES=${2:-1000000}
REPS=${REPS:-2}
BIN=${BIN:-$PWD/target/release/graphflat}
MOTO=${GRAPHFLAT_MOTO_SERVER:-$PWD/.ci/venv/bin/moto_server}
[ -n "${BUILT:-}" ] || cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
[ -x "$MOTO" ] || { echo "no moto_server at $MOTO: run .ci/run once, or set GRAPHFLAT_MOTO_SERVER" >&2; exit 66; }
source bench/timing.sh
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"

PORT=${PORT:-9562}
source bench/moto.sh
start_moto "$PORT" "$WORK/moto.log"

G=$WORK/g$NODES
[ -f "$G/edges/_SUCCESS" ] || $BIN generate --out "$G" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
for staging in multipart copy; do
  cat > "$WORK/$staging.toml" <<EOF
[cluster]
workers = 1
[storage]
staging = "$staging"
[flatten]
nodes = "$G/nodes"
edges = "$G/edges"
output = "s3://bench/flat-$staging"
overwrite = true
fanouts = [10, 10]
EOF
done
for rep in $(seq "$REPS"); do
  for staging in multipart copy; do
    took=$(timed "$staging-$rep" "$BIN" run "$WORK/$staging.toml")
    switch=$(grep -o 'the switch took [0-9.]* s' "$WORK/$staging-$rep.log" | head -1)
    echo "$staging rep $rep: whole command ${took% *} s, $switch"
  done
done
