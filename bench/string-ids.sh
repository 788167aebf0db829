#!/usr/bin/env bash
# The cost of string ids at 1M nodes, one worker / one thread each: a generated graph (average
# degree 10, 32 node features) keyed by int64, and the same tables with every id written as a
# string (`user_<hex>`, `sku-<decimal>-0` or `acct/<8 digits>`: 9 to 13 bytes, as pyarrow
# writes `utf8`):
#
# 1. GraphFlat, fanouts [10, 10]: wall seconds, the map step, peak memory, bytes of records;
# 2. GraphTrainer, GCN (hidden 16), one epoch on each record set;
# 3. GraphInfer with the int model's weights on each graph: wall seconds and peak memory.
#
# REPS times back to back (medians).
#
#   bench/string-ids.sh [work_dir]          NODES=1000000 REPS=2
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-string-bench}
NODES=${NODES:-1000000}
REPS=${REPS:-2}
PY=${PEER_PYTHON:-/tmp/probe-venv/bin/python}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD)"

timed() { # NAME CMD...: prints "seconds peak_MB"
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
  awk '{printf "%s %d", $1, $2 / 1024}' "$WORK/$name.time"
}
mb() { du -sb "$@" | awk '{s+=$1} END {printf "%.0f", s/1e6}'; }

I=$WORK/ints; S=$WORK/strings
if [ ! -f "$I/edges/_SUCCESS" ]; then
  $BIN generate --out "$I" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > "$WORK/generate.log"
fi
if [ ! -d "$S/edges" ]; then # the same tables, every id a string
  "$PY" - "$I" "$S" <<'PY'
import pathlib, sys
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
def keys(ids):
    ids = pc.cast(ids, pa.int64())
    text = pc.cast(ids, pa.string())
    kind = pc.bit_wise_and(ids, 3)
    user = pc.binary_join_element_wise("user_", text, "")
    sku = pc.binary_join_element_wise("sku-", text, "-0", "")
    acct = pc.binary_join_element_wise("acct/", pc.utf8_lpad(text, 8, "0"), "")
    return pc.if_else(pc.equal(kind, 0), user, pc.if_else(pc.equal(kind, 1), sku, acct))
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for table, columns in [("nodes", ["node_id"]), ("edges", ["src", "dst"])]:
    (out / table).mkdir(parents=True, exist_ok=True)
    for part in sorted((src / table).glob("part-*.parquet")):
        data = pq.read_table(part)
        for c in columns:
            data = data.set_column(data.schema.get_field_index(c), c, keys(data[c]))
        pq.write_table(data, out / table / part.name, row_group_size=1 << 20)
PY
fi
echo "tables: ints $(mb "$I/nodes" "$I/edges") MB, strings $(mb "$S/nodes" "$S/edges") MB"

job() { # NAME DATA: flatten, one GCN epoch, GraphInfer with the int model
  local name=$1 data=$2
  cat > "$WORK/$name-flatten.toml" <<EOF
[cluster]
workers = 1
[flatten]
nodes = "$data/nodes"
edges = "$data/edges"
output = "$WORK/$name-flat"
fanouts = [10, 10]
overwrite = true
EOF
  cat > "$WORK/$name-train.toml" <<EOF
[cluster]
workers = 1
[train]
records = "$WORK/$name-flat"
output = "$WORK/$name-model"
model = "gcn"
hidden = 16
epochs = 1
overwrite = true
EOF
  cat > "$WORK/$name-infer.toml" <<EOF
[cluster]
workers = 1
[infer]
nodes = "$data/nodes"
edges = "$data/edges"
model = "$WORK/ints-model"
output = "$WORK/$name-scores"
overwrite = true
EOF
}
job ints "$I"; job strings "$S"

for rep in $(seq "$REPS"); do
  for name in ints strings; do
    f=$(timed "$name-flatten-$rep" $BIN run "$WORK/$name-flatten.toml")
    map=$(grep -o 'map [0-9.]*s' "$WORK/$name-flatten-$rep.log" | head -1 || true)
    t=$(timed "$name-train-$rep" $BIN run "$WORK/$name-train.toml")
    epoch=$(tail -1 "$WORK/$name-model/timings.jsonl" | "$PY" -c 'import json,sys; print(round(json.load(sys.stdin)["seconds"], 2))')
    i=$(timed "$name-infer-$rep" $BIN run "$WORK/$name-infer.toml")
    echo "rep $rep $name: flatten $f ($map), records $(mb "$WORK/$name-flat") MB; epoch ${epoch}s; infer $i"
  done
done

# The peer: a user's own mapping to int64 before the job, with pandas (one process, every string).
/usr/bin/time -f "pandas mapping: %e s, peak %M KB" "$PY" bench/peer/pandas_id_map.py "$S" "$WORK/pandas-ints" "$WORK/ints-scores"
