#!/usr/bin/env bash
# The typed pipeline at scale against PyG on the same tables, one thread or worker each:
# `graphflat generate --hetero` (NODES nodes in 3 types, 10 per node edges in 4 relations), then
# - GraphFlat: a record for every train user, FANOUT in-edges per relation and hop (fanouts
#   [FANOUT, FANOUT]), every relation reversed; against PyG's hetero NeighborLoader sampling the
#   same seeds with the same fanouts (subgraphs per second);
# - one training epoch of heterogeneous GraphSAGE (hidden 32, batches of 256, one kernel thread)
#   on those records; against one epoch of PyG's to_hetero(SAGE) over the loader;
# - GraphInfer over every node of every type with that model; against PyG's full-graph hetero
#   forward pass, load included.
# Each command's wall seconds and peak RSS come from /usr/bin/time; each PyG phase runs in a
# process of its own (bench/peer/pyg_hetero_scale.py).
#
#   bench/hetero-scale.sh [work_dir]      NODES=1000000 FANOUT=3 PEER_PYTHON=/tmp/peer-sampled/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-hetero-scale}
NODES=${NODES:-1000000}
FANOUT=${FANOUT:-3}
PY=${PEER_PYTHON:-$(bench/peer/venv-sampled.sh)}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
G=$WORK/graph
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); $NODES nodes, fanout $FANOUT"
[ -f "$G/nodes/user/_SUCCESS" ] || $BIN generate --hetero --out "$G" --nodes "$NODES" --seed 1 > /dev/null 2>&1

graph() {
  for t in user item shop; do printf '[graph.node_types.%s]\ntable = "%s"\n' "$t" "$G/nodes/$t"; done
  for r in buys:user:item returns:user:item follows:user:user sells:shop:item; do
    IFS=: read -r name src dst <<< "$r"
    printf '[graph.relations.%s]\nsrc = "%s"\ndst = "%s"\ntable = "%s"\nreverse = true\n' "$name" "$src" "$dst" "$G/edges/$name"
  done
}
# timed NAME JOB: runs the job, prints "seconds peak_mb" and keeps its log.
timed() {
  /usr/bin/time -f "%e %M" -o "$WORK/$1.time" $BIN run "$2" > "$WORK/$1.log" 2>&1 || { tail "$WORK/$1.log"; exit 1; }
  awk '{printf "%.1f %d", $1, $2 / 1024}' "$WORK/$1.time"
}
{ echo "[cluster]"; echo "workers = 1"; graph
  printf '[flatten]\noutput = "%s"\noverwrite = true\ntarget_type = "user"\ntargets = ["train"]\nhops = 2\nfanouts = [%s, %s]\n' \
    "$WORK/flat" "$FANOUT" "$FANOUT"; } > "$WORK/flatten.toml"
printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s"\noutput = "%s"\noverwrite = true\nmodel = "sage"\nhidden = 32\nlr = 0.01\nepochs = 1\nbatch_size = 256\nkernel_threads = 1\n' \
  "$WORK/flat" "$WORK/model" > "$WORK/train.toml"
{ echo "[cluster]"; echo "workers = 1"; graph
  printf '[infer]\ntarget_type = "user"\nmodel = "%s"\noutput = "%s"\noverwrite = true\n' "$WORK/model" "$WORK/scores"; } > "$WORK/infer.toml"

read -r FLAT_S FLAT_MB <<< "$(timed flatten "$WORK/flatten.toml")"
RECORDS=$(grep -o '[0-9]* targets' "$WORK/flatten.log" | head -1 | cut -d' ' -f1)
read -r TRAIN_S TRAIN_MB <<< "$(timed train "$WORK/train.toml")"
EPOCH_S=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['seconds'])" "$WORK/model/timings.jsonl" 2>/dev/null || echo "?")
read -r INFER_S INFER_MB <<< "$(timed infer "$WORK/infer.toml")"
for phase in sample epoch infer; do
  OMP_NUM_THREADS=1 "$PY" bench/peer/pyg_hetero_scale.py "$G" "$phase" --fanout "$FANOUT" 2> /dev/null > "$WORK/pyg-$phase.json"
done
python3 - "$WORK" "$RECORDS" "$FLAT_S" "$FLAT_MB" "$TRAIN_S" "$TRAIN_MB" "$EPOCH_S" "$INFER_S" "$INFER_MB" <<'PY'
import json, sys
work, records, flat_s, flat_mb, train_s, train_mb, epoch_s, infer_s, infer_mb = sys.argv[1:]
pyg = {p: json.load(open(f"{work}/pyg-{p}.json")) for p in ["sample", "epoch", "infer"]}
rate = int(records) / float(flat_s)
print(f"records: {records} train users")
print("| step | ours | PyG | ours / PyG |")
print("| --- | --- | --- | --- |")
print(f"| flatten vs NeighborLoader (records/s) | {rate:,.0f} ({flat_s} s, {flat_mb} MB) | {pyg['sample']['per_s']:,} ({pyg['sample']['seconds']} s after a {pyg['sample']['load_s']} s load, {pyg['sample']['peak_mb']} MB) | {rate / pyg['sample']['per_s']:.2f}x the rate |")
print(f"| training epoch (s) | {epoch_s} (command {train_s} s, {train_mb} MB) | {pyg['epoch']['seconds']} ({pyg['epoch']['peak_mb']} MB) | {float(epoch_s) / pyg['epoch']['seconds']:.2f}x the time |")
print(f"| inference, every node (s) | {infer_s} | {pyg['infer']['seconds']} (load {pyg['infer']['load_s']}, forward {pyg['infer']['forward_s']}) | {float(infer_s) / pyg['infer']['seconds']:.2f}x the time |")
print(f"| inference peak memory (MB) | {infer_mb} | {pyg['infer']['peak_mb']} | {int(infer_mb) / pyg['infer']['peak_mb']:.2f}x |")
PY
