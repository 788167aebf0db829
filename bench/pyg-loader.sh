#!/usr/bin/env bash
# Records into PyTorch against PyG's `NeighborLoader` (issue 51, item 6), one process and one
# thread each (`torch.set_num_threads(1)`, Arrow's CPU pool at 1, OMP_NUM_THREADS=1), the same
# machine, the same session. The graph: `graphflat generate` (NODES nodes, average degree 10, 32
# features, power-law in-degrees, seed 1); its records: GraphFlat, one worker, fanouts [10, 10],
# seed 1 (made once, kept in WORK).
#
# Per rep, alternating (bench/peer/pyg_loader.py, one process per side and rep):
# 1. ours: `graphflat.open_records(records).batches(split=SPLIT, batch_size=512, shuffle=True)`,
#    each batch `.to_pyg()`, a full pass over the split's records;
# 2. PyG: the node and edge tables read into one `Data` (x, edge_index, y; load seconds apart,
#    not counted), `NeighborLoader(data, num_neighbors=[10, 10], batch_size=512, shuffle=True,
#    input_nodes=<the split's nodes>)` (made apart, not counted: it builds the CSC index), a full
#    pass over as many seeds as ours has records.
# Records/s and seeds/s are over the pass only; peak RSS is the whole process's
# (/usr/bin/time). Medians over REPS reps. Two optional sides, each in every rep:
# - BASE=<commit>: ours with python/graphflat as of that commit (`git archive` into WORK), the
#   same records;
# - PLAIN=1: ours on a copy of the records whose `node_features` column is written uncompressed
#   and without a dictionary (bench/rewrite_records.py; every other column as GraphFlat writes
#   it), what the pass would take if GraphFlat's writer wrote that column so.
#
#   bench/pyg-loader.sh [work_dir]     NODES=1000000 REPS=3 SPLIT=train BASE= PLAIN=
#                                      PEER_PYTHON=/tmp/peer-sampled/bin/python BIN=target/release/graphflat
# PEER_PYTHON: a python with pyarrow, numpy, torch, torch_geometric and `torch-sparse` (or
# `pyg-lib`), which `NeighborLoader` needs; bench/peer/venv-sampled.sh makes one. Both sides run
# in it (ours from python/ of this tree). BIN: use that binary and skip the build (default:
# cargo build --release, with FEATURES).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-pyg-loader}
NODES=${NODES:-1000000}
REPS=${REPS:-3}
SPLIT=${SPLIT:-train}
PY=${PEER_PYTHON:-$(bench/peer/venv-sampled.sh)}
if [ -z "${BIN:-}" ]; then
  BIN=target/release/graphflat
  cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- python || echo ' (python/ changed)'); $NODES nodes, split $SPLIT, $REPS reps"
export OMP_NUM_THREADS=1

G=$WORK/g; R=$WORK/records
if [ ! -f "$G/edges/_SUCCESS" ]; then
  $BIN generate --out "$G" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > "$WORK/generate.log"
fi
if [ ! -f "$R/_SUCCESS" ]; then
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nhops = 2\nfanouts = [10, 10]\nseed = 1\n' \
    "$G" "$G" "$R" > "$WORK/flatten.toml"
  $BIN run "$WORK/flatten.toml" > "$WORK/flatten.log" 2>&1 || { tail -20 "$WORK/flatten.log"; exit 1; }
fi
echo "records: $(du -sbL "$R" | awk '{printf "%.0f MB", $1 / 1e6}'), $(grep -h "record nodes" "$WORK/flatten.log" | sed 's/^ *//')"

# Sides: name, PYTHONPATH, what bench/peer/pyg_loader.py reads.
SIDES=("ours|$PWD/python|$R" "pyg|$PWD/python|$G")
if [ -n "${BASE:-}" ]; then
  rm -rf "$WORK/base" && mkdir -p "$WORK/base" && git archive "$BASE" python/graphflat | tar -x -C "$WORK/base"
  SIDES+=("base|$WORK/base/python|$R")
fi
if [ -n "${PLAIN:-}" ]; then
  [ -f "$WORK/records-plain/_SUCCESS" ] || "$PY" bench/rewrite_records.py "$R" "$WORK/records-plain" --compression none
  echo "records with node_features uncompressed: $(du -sbL "$WORK/records-plain" | awk '{printf "%.0f MB", $1 / 1e6}')"
  SIDES+=("plain|$PWD/python|$WORK/records-plain")
fi

: > "$WORK/runs.jsonl"
for rep in $(seq "$REPS"); do
  for spec in "${SIDES[@]}"; do
    IFS='|' read -r name path_py path <<< "$spec"
    side=ours; [ "$name" = pyg ] && side=pyg
    PYTHONPATH=$path_py /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$PY" bench/peer/pyg_loader.py "$side" "$path" \
      --split "$SPLIT" > "$WORK/$name.log" 2> "$WORK/$name.err" || { tail -20 "$WORK/$name.err"; exit 1; }
    read -r wall kb < "$WORK/$name.time"
    "$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); d.update(side=sys.argv[2], rep=int(sys.argv[3]), wall_s=float(sys.argv[4]), rss_mb=int(sys.argv[5]) // 1024); print(json.dumps(d))' \
      "$(tail -1 "$WORK/$name.log")" "$name" "$rep" "$wall" "$kb" | tee -a "$WORK/runs.jsonl"
  done
done

"$PY" - "$WORK/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
sides = list(dict.fromkeys(r["side"] for r in runs))
med = lambda side, key: statistics.median(r[key] for r in runs if r["side"] == side)
each = lambda side, key, f="{:.0f}": ", ".join(f.format(r[key]) for r in runs if r["side"] == side)
first = {s: next(r for r in runs if r["side"] == s) for s in sides}
o, p = first["ours"], first["pyg"]
print(f"torch {o['torch']}, torch_geometric {o['torch_geometric']}, pyarrow {o['pyarrow']}; torch threads {o['torch_threads']}, "
      f"Arrow threads {o['arrow_threads']}; NeighborLoader's sampler: {p['sampler']}")
for s in sides:
    r = first[s]
    what = "seeds" if s == "pyg" else "records"
    print(f"{s}: {r['seeds']} {what} in {r['batches']} batches, {r['nodes_per_batch']:.0f} nodes and {r['edges_per_batch']:.0f} edges a batch")
for s in sides:
    what = "seeds" if s == "pyg" else "records"
    setup = (f"load {med(s, 'load_s'):.2f} s (RSS {med(s, 'loaded_mb'):.0f} MB after), loader {med(s, 'loader_s'):.2f} s"
             if s == "pyg" else f"open {med(s, 'open_s'):.3f} s")
    print(f"{s}: pass {med(s, 'pass_s'):.2f} s ({each(s, 'pass_s', '{:.2f}')}): {med(s, 'per_s'):.0f} {what}/s; "
          f"CPU {med(s, 'pass_cpu_s'):.2f} s ({each(s, 'pass_cpu_s', '{:.2f}')}): {med(s, 'seeds') / med(s, 'pass_cpu_s'):.0f} {what}/CPU-s; {setup}; "
          f"imports {med(s, 'imports_s'):.2f} s (RSS {med(s, 'imports_mb'):.0f} MB after); whole process {med(s, 'wall_s'):.2f} s; "
          f"peak {med(s, 'rss_mb'):.0f} MB ({each(s, 'rss_mb')})")
for s in sides:
    if s != "pyg":
        print(f"{s} / pyg, per second over the pass: {med(s, 'per_s') / med('pyg', 'per_s'):.2f}x "
              f"(per CPU second {med('pyg', 'pass_cpu_s') / med(s, 'pass_cpu_s'):.2f}x); "
              f"whole process, pyg / {s}: {med('pyg', 'wall_s') / med(s, 'wall_s'):.2f}x")
PY
