#!/usr/bin/env bash
# The link task on a machine with a GPU: Cora's link records (jobs/cora-link.toml's settings,
# one worker, 10 epochs without early stopping) trained with device = "cpu" and then "gpu" from
# the same records, each followed by GraphInfer's embeddings and pair scores (100,000 random
# pairs) on its device; then the CPU-trained model inferred on the GPU. Prints each run's epoch
# times and AUCs, and how far the GPU's embeddings and scores of the CPU model are from the
# CPU's (BENCHMARKS.md, "Link prediction on Cora").
#
# It expects what bench/gpu-device.sh expects (its header says how to prepare them):
#   .gpu/graphflat.xz, .gpu/cora, .gl/*.deb
# and writes each job's log to $OUT (or /tmp/w when OUT is unset).
#
#   bash bench/gpu-link.sh
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
xz -dc .gpu/graphflat.xz > /tmp/graphflat; chmod +x /tmp/graphflat; B=/tmp/graphflat; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$B import ogb .gpu/cora --out $W/cora > /dev/null 2>&1 || echo "import failed"
$B split-edges --edges $W/cora/edges --out $W/split --valid 0.05 --test 0.1 --seed 0 --undirected > /dev/null
python3 - "$W" <<'PY'
import sys, random
import pyarrow as pa, pyarrow.parquet as pq
w = sys.argv[1]
ids = pq.read_table(f"{w}/cora/nodes", columns=["node_id"]).column(0).to_pylist()
rng = random.Random(1)
pairs = [(rng.choice(ids), rng.choice(ids)) for _ in range(100000)]
import os; os.makedirs(f"{w}/pairs", exist_ok=True)
pq.write_table(pa.table({"src": pa.array([p[0] for p in pairs], pa.int64()),
                         "dst": pa.array([p[1] for p in pairs], pa.int64())}), f"{w}/pairs/part-0.parquet")
PY
cat > $W/flat.toml <<T
[cluster]
workers = 1
[flatten]
nodes = "$W/cora/nodes"
edges = "$W/split"
output = "$W/flat"
hops = 2
sampler = "all"
task = "link"
negatives = 1
batch_size = 256
T
$B run $W/flat.toml > $W/flat.log 2>&1 || { echo "flatten failed"; tail $W/flat.log; }
for dev in cpu gpu; do
cat > $W/link-$dev.toml <<T
[cluster]
workers = 1
[train]
records = "$W/flat"
output = "$W/model-$dev"
model = "gcn"
hidden = 128
embedding_dim = 64
in_batch_negatives = true
dropout = 0.0
weight_decay = 0.0
lr = 0.01
epochs = 10
batch_size = 512
prefetch = 1
cache_mb = 1024
device = "$dev"
[infer]
nodes = "$W/cora/nodes"
edges = "$W/split"
model = "$W/model-$dev"
output = "$W/emb-$dev"
pairs = "$W/pairs"
pairs_output = "$W/pairs-$dev"
device = "$dev"
T
/usr/bin/time -f "link-$dev wall %e s peak %M KB" $B run $W/link-$dev.toml > $W/link-$dev.log 2>&1 || { echo "link-$dev failed"; tail -30 $W/link-$dev.log; }
tail -1 $W/link-$dev.log
grep -oE "epoch [0-9]+/10: loss [0-9.]+|test auc [0-9.]+ mrr|[0-9.]+s, [0-9]+ records/s, waited [0-9.]+s" $W/link-$dev.log | paste - - - | sed 's/ mrr//'
cp $W/link-$dev.log "${OUT:-$W}/" 2>/dev/null
done
cat > $W/infer-x.toml <<T
[cluster]
workers = 1
[infer]
nodes = "$W/cora/nodes"
edges = "$W/split"
model = "$W/model-cpu"
output = "$W/emb-x"
pairs = "$W/pairs"
pairs_output = "$W/pairs-x"
device = "gpu"
T
/usr/bin/time -f "infer-x wall %e s peak %M KB" $B run $W/infer-x.toml > $W/infer-x.log 2>&1 || { echo "infer-x failed"; tail -30 $W/infer-x.log; }
tail -1 $W/infer-x.log; grep -h "phases" $W/link-cpu.log $W/link-gpu.log $W/infer-x.log
python3 - "$W" <<'PY'
import sys
import numpy as np, pyarrow.parquet as pq
w = sys.argv[1]
def emb(dev):
    t = pq.read_table(f"{w}/emb-{dev}").sort_by("node_id")
    return np.array(t.column("embedding").to_pylist(), dtype=np.float64)
def scores(dev):
    t = pq.read_table(f"{w}/pairs-{dev}").sort_by([("src", "ascending"), ("dst", "ascending")])
    return np.array(t.column("score").to_pylist(), dtype=np.float64)
e, s = np.abs(emb("cpu") - emb("x")), np.abs(scores("cpu") - scores("x"))
print(f"the CPU model on the GPU against the CPU: embeddings max |diff| {e.max():.3g}, pair scores max |diff| {s.max():.3g}")
PY
