#!/usr/bin/env bash
# Link prediction on Cora against PyG's recipe, on the same split tables, 3 seeds: split-edges
# (5% valid, 10% test, undirected), then ours (PyG's recipe through the job keys: link records
# with every in-edge over 2 hops, one drawn negative each, GCN 1433 -> 128 -> 64, dot decoder,
# Adam 0.01, at most EPOCHS epochs, batches of 512, one worker; everything else the link task's
# defaults: batch negatives from the other records' negatives, dropout 0.5, no weight decay,
# patience 10) and bench/peer/pyg_link.py (full-batch GCN 128 -> 64, one fresh negative per
# positive per epoch, EPOCHS epochs, one thread). Prints each run's test AUC at its best
# validation AUC and its seconds (ours: the whole `run` command, flatten included, and the
# training alone; PyG: its training loop).
#
# With LEARNED=D, Cora's features are dropped (the node table loses its `features` column) and
# both sides learn a D-wide vector per node instead: ours `learned_embedding_dim = D` (lazy Adam
# on the parameter server, the default), PyG `torch.nn.Embedding(N, D)` (dense Adam).
#
# With FULL=1 ours trains on the graph itself (full-graph training: [train] nodes and edges, no
# flatten, no records; one fresh negative per training edge per epoch, as PyG), all EPOCHS epochs
# (patience = 0), with one kernel thread; the PyG side is then also timed as a whole command.
#
#   bench/link-cora.sh [work_dir]          EPOCHS=100 LEARNED=0 FULL=0 PEER_PYTHON=/tmp/peer/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-link-cora}
EPOCHS=${EPOCHS:-100}
LEARNED=${LEARNED:-0}
FULL=${FULL:-0}
if [ "$FULL" = 1 ] && [ "$LEARNED" -gt 0 ]; then echo "FULL=1 trains on node features: leave LEARNED out" >&2; exit 64; fi
PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); $EPOCHS epochs, learned $LEARNED"
[ -f "$WORK/cora/edges/_SUCCESS" ] || $BIN import ogb ../shared/data/cora --out "$WORK/cora" > /dev/null
NODES=$WORK/cora/nodes
if [ "$LEARNED" -gt 0 ]; then
  NODES=$WORK/cora-bare/nodes
  mkdir -p "$NODES"
  "$PY" -c "import pyarrow.parquet as pq, sys; pq.write_table(pq.read_table(sys.argv[1]).drop_columns(['features']), sys.argv[2])" \
    "$WORK/cora/nodes" "$NODES/part-0.parquet"
fi
for SEED in 0 1 2; do
  G=$WORK/seed$SEED
  rm -rf "$G"; mkdir -p "$G"; ln -s "$NODES" "$G/nodes"
  $BIN split-edges --edges "$WORK/cora/edges" --out "$G/edges" --valid 0.05 --test 0.1 --seed "$SEED" --undirected > /dev/null
  if [ "$FULL" = 1 ]; then
    cat > "$G/job.toml" <<TOML
[cluster]
workers = 1
[train]
nodes = "$G/nodes"
edges = "$G/edges"
output = "$G/model"
task = "link"
layers = 2
model = "gcn"
hidden = 128
embedding_dim = 64
lr = 0.01
epochs = $EPOCHS
patience = 0
negatives = 1
kernel_threads = 1
seed = $SEED
TOML
  else
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
lr = 0.01
epochs = $EPOCHS
batch_size = 512
prefetch = 1
cache_mb = 1024
learned_embedding_dim = $LEARNED
seed = $SEED
TOML
  fi
  /usr/bin/time -f "%e %M" -o "$G/time" $BIN run "$G/job.toml" > "$G/log" 2>&1 || { tail "$G/log"; exit 1; }
  python3 - "$G" "$SEED" <<'PY'
import json, sys
g, seed = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{g}/model/metrics.jsonl")]
best = max(rows, key=lambda r: r["valid_auc"])
timings = [json.loads(l) for l in open(f"{g}/model/timings.jsonl")]
train_s = sum(t["seconds"] for t in timings)
later = timings[1:] or timings
mean = lambda key: sum(t[key] for t in later) / len(later)
wall, peak = open(f"{g}/time").read().split()
print(f"ours seed {seed}: test auc {best['test_auc']:.4f} at epoch {best['epoch']} (valid {best['valid_auc']:.4f}), "
      f"mrr {best['test_mrr']:.4f}, hits@50 {best['test_hits@50']:.4f}; {len(rows)} epochs, training {train_s:.1f}s "
      f"(first epoch {timings[0]['seconds']:.1f}s, later ones {mean('seconds'):.2f}s: batches built on the loader thread "
      f"{mean('build_seconds'):.2f}s, forward {mean('forward_seconds'):.2f}s, backward {mean('backward_seconds'):.2f}s, "
      f"evaluation and the rest {mean('seconds') - mean('forward_seconds') - mean('backward_seconds') - mean('tensors_seconds'):.2f}s), "
      f"whole command {wall}s, peak {int(peak)//1024} MB")
PY
  # PyG reads Cora's features (its nodes table), or none with --learned-dim.
  ln -sfn "$WORK/cora/nodes" "$G/nodes"
  /usr/bin/time -f "%e %M" -o "$G/pyg-time" "$PY" bench/peer/pyg_link.py "$G" --epochs "$EPOCHS" --seed "$SEED" \
    --learned-dim "$LEARNED" > "$G/pyg" 2> "$G/pyg.err" || { tail "$G/pyg.err"; exit 1; }
  echo "pyg  seed $SEED: $(cat "$G/pyg"); whole command $(cut -d' ' -f1 "$G/pyg-time")s"
done
