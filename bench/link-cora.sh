#!/usr/bin/env bash
# Link prediction on Cora against PyG's recipe, on the same split tables, 3 seeds: split-edges
# (5% valid, 10% test, undirected), then ours (link records with every in-edge over 2 hops, GCN
# 1433 -> 128 -> 64, dot decoder, one drawn negative per record plus in-batch negatives over
# batches of 512, Adam 0.01, at most EPOCHS epochs with patience 3 as jobs/cora-link.toml, one
# worker) and bench/peer/pyg_link.py (full-batch GCN 128 -> 64, one fresh negative per positive
# per epoch, EPOCHS epochs, one thread). Prints each run's test AUC at its best
# validation AUC and its seconds (ours: the whole `run` command, flatten included, and the
# training alone; PyG: its training loop).
#
#   bench/link-cora.sh [work_dir]          EPOCHS=100 PEER_PYTHON=/tmp/peer/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-link-cora}
EPOCHS=${EPOCHS:-100}
PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); $EPOCHS epochs"
[ -f "$WORK/cora/edges/_SUCCESS" ] || $BIN import ogb ../shared/data/cora --out "$WORK/cora" > /dev/null
for SEED in 0 1 2; do
  G=$WORK/seed$SEED
  rm -rf "$G"; mkdir -p "$G"; ln -s "$WORK/cora/nodes" "$G/nodes"
  $BIN split-edges --edges "$WORK/cora/edges" --out "$G/edges" --valid 0.05 --test 0.1 --seed "$SEED" --undirected > /dev/null
  cat > "$G/job.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$G/nodes"
edges = "$G/edges"
output = "$G/flat"
batch_size = 256
hops = 2
sampler = "all"
task = "link"
negatives = 1
seed = $SEED
[train]
records = "$G/flat"
output = "$G/model"
model = "gcn"
hidden = 128
embedding_dim = 64
in_batch_negatives = true
dropout = 0.0
weight_decay = 0.0
lr = 0.01
epochs = $EPOCHS
batch_size = 512
prefetch = 1
cache_mb = 1024
patience = 3
seed = $SEED
TOML
  /usr/bin/time -f "%e %M" -o "$G/time" $BIN run "$G/job.toml" > "$G/log" 2>&1 || { tail "$G/log"; exit 1; }
  python3 - "$G" "$SEED" <<'PY'
import json, sys
g, seed = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{g}/model/metrics.jsonl")]
best = max(rows, key=lambda r: r["valid_auc"])
train_s = sum(json.loads(l)["seconds"] for l in open(f"{g}/model/timings.jsonl"))
wall, peak = open(f"{g}/time").read().split()
print(f"ours seed {seed}: test auc {best['test_auc']:.4f} at epoch {best['epoch']} (valid {best['valid_auc']:.4f}), "
      f"mrr {best['test_mrr']:.4f}, hits@50 {best['test_hits@50']:.4f}; training {train_s:.1f}s, whole command {wall}s, peak {int(peak)//1024} MB")
PY
  echo "pyg  seed $SEED: $("$PY" bench/peer/pyg_link.py "$G" --epochs "$EPOCHS" --seed "$SEED")"
done
