#!/usr/bin/env bash
# The typed models against the same models with types and relations erased, and against PyG's
# to_hetero(SAGE), on the same tables, 3 seeds: `graphflat generate --hetero --erased` (NODES
# nodes), then ours (records with fanouts [10, 10] per relation and hop, every relation
# reversed; R-GCN and heterogeneous GraphSAGE, and GraphSAGE on the erased view with fanouts
# [10, 10]; hidden 32, Adam 0.01, batches of 128, EPOCHS epochs, one worker and one kernel
# thread) and bench/peer/pyg_hetero.py (the same settings, NeighborLoader, one thread). Prints
# each run's test accuracy at its best validation epoch and its median epoch seconds.
#
#   bench/hetero-signal.sh [work_dir]      NODES=20000 EPOCHS=10 PEER_PYTHON=/tmp/peer-sampled/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-hetero-signal}
NODES=${NODES:-20000}
EPOCHS=${EPOCHS:-10}
PY=${PEER_PYTHON:-$(bench/peer/venv-sampled.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); $NODES nodes, $EPOCHS epochs"
echo "seed | ours R-GCN | ours hetero SAGE | ours SAGE, erased | PyG to_hetero(SAGE) | PyG SAGE, erased | epoch s: R-GCN, hetero SAGE, PyG hetero"
for SEED in 0 1 2; do
  G=$WORK/seed$SEED
  rm -rf "$G"; mkdir -p "$G"
  $BIN generate --hetero --erased --out "$G/graph" --nodes "$NODES" --seed "$SEED" > /dev/null 2>&1
  {
    echo "[cluster]"; echo "workers = 1"
    for t in user item shop; do printf '[graph.node_types.%s]\ntable = "%s"\n' "$t" "$G/graph/nodes/$t"; done
    for r in buys:user:item returns:user:item follows:user:user sells:shop:item; do
      IFS=: read -r name src dst <<< "$r"
      printf '[graph.relations.%s]\nsrc = "%s"\ndst = "%s"\ntable = "%s"\nreverse = true\n' "$name" "$src" "$dst" "$G/graph/edges/$name"
    done
    printf '[flatten]\noutput = "%s"\ntarget_type = "user"\nhops = 2\nfanouts = [10, 10]\nsampler = "uniform"\nseed = %s\n' "$G/typed" "$SEED"
  } > "$G/typed.toml"
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s"\nedges = "%s"\noutput = "%s"\nhops = 2\nfanouts = [10, 10]\nsampler = "uniform"\nseed = %s\n' \
    "$G/graph/erased/nodes" "$G/graph/erased/edges" "$G/erased" "$SEED" > "$G/erased.toml"
  $BIN run "$G/typed.toml" > "$G/typed.log" 2>&1 || { tail "$G/typed.log"; exit 1; }
  $BIN run "$G/erased.toml" > "$G/erased.log" 2>&1 || { tail "$G/erased.log"; exit 1; }
  train() { # records model name
    printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s"\noutput = "%s"\nmodel = "%s"\nhidden = 32\nlr = 0.01\nepochs = %s\nbatch_size = 128\nkernel_threads = 1\nseed = %s\n' \
      "$1" "$G/model-$3" "$2" "$EPOCHS" "$SEED" > "$G/train-$3.toml"
    $BIN run "$G/train-$3.toml" > "$G/train-$3.log" 2>&1 || { tail "$G/train-$3.log"; exit 1; }
  }
  train "$G/typed" rgcn rgcn
  train "$G/typed" sage sage
  train "$G/erased" sage erased
  OMP_NUM_THREADS=1 "$PY" bench/peer/pyg_hetero.py "$G/graph" --epochs "$EPOCHS" 2> /dev/null > "$G/pyg.json"
  python3 - "$G" "$SEED" <<'PY'
import json, statistics, sys
g, seed = sys.argv[1], sys.argv[2]
def ours(name):
    rows = [json.loads(l) for l in open(f"{g}/model-{name}/metrics.jsonl")]
    best = max(rows, key=lambda r: (r["valid_accuracy"], -r["epoch"]))
    times = [json.loads(l)["seconds"] for l in open(f"{g}/model-{name}/timings.jsonl")]
    return best["test_accuracy"], statistics.median(times)
(rgcn, rgcn_s), (sage, sage_s), (erased, _) = ours("rgcn"), ours("sage"), ours("erased")
peer = json.load(open(f"{g}/pyg.json"))
print(f"{seed} | {rgcn:.3f} | {sage:.3f} | {erased:.3f} | {peer['typed_sage']['test_accuracy']:.3f} | "
      f"{peer['erased_sage']['test_accuracy']:.3f} | {rgcn_s:.2f}, {sage_s:.2f}, {peer['typed_sage']['epoch_s']:.2f}")
PY
done
