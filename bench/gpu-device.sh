#!/usr/bin/env bash
# GPU against CPU on a machine with a GPU: the same jobs with device = "cpu" and "gpu", one
# worker (BENCHMARKS.md, "GPU against CPU on the device machine"). Cora (200-epoch GCN, then
# GraphInfer) and a generated 1M-node graph (RUNS below: one epoch and GraphInfer of each
# model, width and device).
#
# It expects, in the folder it runs from (the repository root):
#   .gpu/graphflat.xz   a release build with --features gpu, stripped and xz-compressed
#                       (cargo build --release --features gpu,hdfs; strip -o .gpu/graphflat
#                       target/release/graphflat; xz .gpu/graphflat)
#   .gpu/cora           a copy of ../shared/data/cora
#   .gl/*.deb           the Vulkan and GL loaders, when the machine has none (Debian's
#                       libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
# and writes each job's log to $OUT (or /tmp/w when OUT is unset).
#
#   bash bench/gpu-device.sh          PARTS="cora 1m" (either or both)
#   PARTS=1m RUNS="gcn:256:1:cpu gcn:256:1:gpu gat:256:8:gpu" EPOCHS=2 LIMIT=300 bash bench/gpu-device.sh
set -uo pipefail
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
xz -dc .gpu/graphflat.xz > /tmp/graphflat; chmod +x /tmp/graphflat; B=/tmp/graphflat; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
t() { local name=$1; shift; /usr/bin/time -f "$name wall %e s peak %M KB" "$@" > $W/$name.log 2>&1; local c=$?; tail -1 $W/$name.log; grep -h "phases\|epoch.*loss\|first step\|test " $W/$name.log | tail -4; [ $c = 0 ] || { echo "$name failed $c"; tail -30 $W/$name.log; }; cp $W/$name.log "${OUT:-$W}/" 2>/dev/null; }
if [[ " ${PARTS:-cora 1m} " == *" cora "* ]]; then
$B import ogb .gpu/cora --out $W/cora > /dev/null 2>&1 || echo "import failed"
cat > $W/cflat.toml <<T
[cluster]
workers = 1
[flatten]
nodes = "$W/cora/nodes"
edges = "$W/cora/edges"
output = "$W/cora/flat"
sampler = "all"
T
$B run $W/cflat.toml > /dev/null 2>&1 || echo "cora flatten failed"
for dev in cpu gpu; do
cat > $W/cora-$dev.toml <<T
[cluster]
workers = 1
[train]
records = "$W/cora/flat"
output = "$W/cora/model-$dev"
overwrite = true
model = "gcn"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4
epochs = 200
batch_size = 140
normalize_features = true
device = "$dev"
[infer]
nodes = "$W/cora/nodes"
edges = "$W/cora/edges"
model = "$W/cora/model-$dev"
output = "$W/cora/scores-$dev"
overwrite = true
device = "$dev"
T
t cora-$dev $B run $W/cora-$dev.toml
done
fi
if [[ " ${PARTS:-cora 1m} " == *" 1m "* ]]; then
# RUNS: model:hidden:heads:device each, one epoch (EPOCHS) of training on the 1M records,
# then GraphInfer of the trained model on the same device. Each run's line of timings.jsonl
# (the step phases: graphtrainer/src/phases.rs) follows its wall time.
RUNS=${RUNS:-gcn:16:1:cpu gcn:16:1:gpu gcn:256:1:cpu gcn:256:1:gpu}
$B generate --out $W/g --nodes 1000000 --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
printf '[cluster]\nworkers = 16\n[flatten]\nnodes = "%s/g/nodes"\nedges = "%s/g/edges"\noutput = "%s/flat"\nhops = 2\nfanouts = [10, 10]\n' $W $W $W > $W/flat.toml
t flatten16 $B run $W/flat.toml
for run in $RUNS; do
IFS=: read -r model hidden heads dev <<< "$run"; name=$model-$hidden-$heads-$dev
printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s/flat"\noutput = "%s/m-%s"\noverwrite = true\nmodel = "%s"\nhidden = %s\nheads = %s\nepochs = %s\nbatch_size = 1024\ncache_mb = 8192\ndevice = "%s"\n[infer]\nnodes = "%s/g/nodes"\nedges = "%s/g/edges"\nmodel = "%s/m-%s"\noutput = "%s/s-%s"\noverwrite = true\ndevice = "%s"\nbatch_size = 65536\n' \
  $W $W $name $model $hidden $heads ${EPOCHS:-1} $dev $W $W $W $name $W $name $dev > $W/$name.toml
t $name timeout ${LIMIT:-600} $B run $W/$name.toml
cat $W/m-$name/timings.jsonl 2>/dev/null
done
fi
