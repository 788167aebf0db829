#!/usr/bin/env bash
# Stages routed by a partition table (BENCHMARKS.md section 22): `partition = "PATH"` in
# [flatten] and [infer] against the hash owner, on generated graphs (average degree 10, 32
# features, seed 1) partitioned by the [partition] stage into PARTS parts (2 workers).
#
#   bench/owner-map.sh [work_dir]   SIZES="1000000 4000000 10000000" REPS=2 PARTS=8 PAUSE=10 RATE=1gbit
#
# 1. GraphInfer's cost per edge on one worker (2-layer GCN over every in-edge, as
#    bench/scale.sh), hash-owned and partitioned runs alternating, REPS each per size: wall
#    seconds, peak MB, the layers' phases. On one worker the partition only orders the nodes
#    (part by part), which is what a fold's reads see.
# 2. At the first size: GraphFlat (2 hops, fanouts 10 and 5) and GraphInfer, hash-owned and
#    partitioned, on 1 worker, 2 workers of one process and 2 processes of one worker in two
#    network namespaces joined by a veth pair limited to RATE each way (tc tbf; needs root):
#    wall seconds and the rows the summary says crossed workers.
# Every run's output is compared with the hash-owned run's (sorted rows): the script stops on a
# difference. PYTHON (with pyarrow) compares and makes the model; BIN=/path runs that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-scale}
SIZES=${SIZES:-"1000000 4000000 10000000"}
REPS=${REPS:-2}
PARTS=${PARTS:-8}
PAUSE=${PAUSE:-0}
RATE=${RATE:-1gbit}
PYTHON=${PYTHON:-python3}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=$PWD/target/release/graphflat
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD)"
source bench/timing.sh
source bench/model_all.sh
all_edges_model "$WORK" "$BIN"

graph() { # N: generated and partitioned once
  local g=$WORK/g$1
  [ -f "$g/edges/_SUCCESS" ] || "$BIN" generate --out "$g" --nodes "$1" --avg-degree 10 --feature-dim 32 --seed 1 | tail -1
  if [ ! -f "$g-parts$PARTS/_SUCCESS" ]; then
    printf '[cluster]\nworkers = 2\n[partition]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s-parts%s"\nparts = %s\noverwrite = true\n' \
      "$g" "$g" "$g" "$PARTS" "$PARTS" > "$WORK/partition-$1.toml"
    read -r S MB <<< "$(timed "partition-$1" "$BIN" run "$WORK/partition-$1.toml")"
    echo "$1 nodes: partitioned into $PARTS parts in ${S}s, ${MB} MB peak; $(grep -h "edge cut:" "$WORK/partition-$1.log" | sed 's/^ *//')"
  fi
}

section() { # stage N output map: the stage's section, with `partition` when map is not "-"
  local g=$WORK/g$2
  case $1 in
    infer) printf '[infer]\nnodes = "%s/nodes"\nedges = "%s/edges"\nmodel = "%s/model-all"\noutput = "%s"\noverwrite = true\n' "$g" "$g" "$WORK" "$3" ;;
    flatten) printf '[flatten]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nhops = 2\nfanouts = [10, 5]\n' "$g" "$g" "$3" ;;
  esac
  [ "$4" = - ] || printf 'partition = "%s"\n' "$4"
}

same() { # the output of a run against the hash-owned run's
  "$PYTHON" - "$1" "$2" <<'PY' || { echo "OUTPUTS DIFFER: $1 $2"; exit 1; }
import sys, pyarrow.parquet as pq
# One row per node or record, keyed by the first column: sorted by it, the tables must be equal.
def rows(d):
    t = pq.read_table(d)
    return t.sort_by([(t.column_names[0], "ascending")])
sys.exit(0 if rows(sys.argv[1]).equals(rows(sys.argv[2])) else 1)
PY
}

phases() { grep -h "phases:" "$WORK/$1.log" | sed 's/^ *phases: */ /'; }
crossed() { grep -h "exchanged:" "$WORK/$1.log" | sed 's/^ *exchanged: *//'; }

# 1. The curve.
for N in $SIZES; do
  graph "$N"
  for v in hash parts; do : > "$WORK/om-$v-$N.runs"; done
  for r in $(seq "$REPS"); do
    for v in hash parts; do
      map=-; [ $v = parts ] && map=$WORK/g$N-parts$PARTS
      { printf '[cluster]\nworkers = 1\n'; section infer "$N" "$WORK/om-scores-$v-$N" "$map"; } > "$WORK/om-$v-$N.toml"
      sleep "$PAUSE"
      read -r S MB <<< "$(timed "om-$v-$N-$r" "$BIN" run "$WORK/om-$v-$N.toml")"
      echo "$S $MB" >> "$WORK/om-$v-$N.runs"
      echo "$N nodes, $v, run $r: ${S}s, ${MB} MB peak;$(phases "om-$v-$N-$r")"
    done
    same "$WORK/om-scores-hash-$N" "$WORK/om-scores-parts-$N"
  done
  for v in hash parts; do
    S=$(awk '{print $1}' "$WORK/om-$v-$N.runs" | median)
    echo "== $N nodes, $v: median ${S}s; $(echo "scale=3; $S / ($N * 10 / 1000000)" | bc) s per million edges"
  done
done

# 2. One size on 1 and 2 workers and on 2 processes over a limited wire.
N=${SIZES%% *}
TAG=gfom$$
source bench/wire.sh
trap wire_down EXIT
wire_up
port=$((20000 + $$ % 20000))
for stage in flatten infer; do
  for shape in one two procs; do
    for v in hash parts; do
      map=-; [ $v = parts ] && map=$WORK/g$N-parts$PARTS
      out=$WORK/om-$stage-$shape-$v; name=om-$stage-$shape-$v
      case $shape in
        one) cluster='[cluster]\nworkers = 1\n' ;;
        two) cluster='[cluster]\nworkers = 2\n' ;;
        procs) cluster="[cluster]\nworkers = 1\nprocesses = 2\nhosts = [\"10.78.0.1:$port\", \"10.78.0.2:$port\"]\n" ;;
      esac
      { printf "$cluster"; section $stage "$N" "$out" "$map"; } > "$WORK/$name.toml"
      sleep "$PAUSE"
      if [ $shape = procs ]; then
        start=$(date +%s.%N)
        ip netns exec ${TAG}b "$BIN" run "$WORK/$name.toml" --process 1 > "$WORK/$name-1.log" 2>&1 &
        ip netns exec ${TAG}a "$BIN" run "$WORK/$name.toml" --process 0 > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
        wait $! || { cat "$WORK/$name-1.log"; exit 1; }
        S=$(echo "$(date +%s.%N) - $start" | bc | xargs printf '%.2f'); MB=-
        port=$((port + 1))
      else
        read -r S MB <<< "$(timed "$name" "$BIN" run "$WORK/$name.toml")"
      fi
      echo "$N nodes, $stage, $shape, $v: ${S}s, ${MB} MB peak; exchanged $(crossed "$name");$(phases "$name")"
    done
    same "$WORK/om-$stage-$shape-hash" "$WORK/om-$stage-$shape-parts"
  done
done
