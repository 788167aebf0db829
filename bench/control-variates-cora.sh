#!/usr/bin/env bash
# Control variates on Cora (docs/control-variates.md): GCN with Kipf and Welling's settings
# (hidden 16, dropout 0.5, Adam 0.01, weight decay 5e-4, 200 epochs, 140 labeled nodes a batch)
# over [precompute]'s Â X, records of one hop, one worker, one kernel thread, for each seed in
# SEEDS: every in-edge (the exact GCN); fanouts [2] and [5] plain; fanout [2] with control
# variates (the same two in-edges each epoch); and fanouts [5] and [10] with control variates
# drawing 2 of the record's in-edges afresh each epoch (control_variate_fanout = 2). Prints, per
# run, the records' size, the training's time and the test accuracy at the best validation epoch.
# MODEL=sage runs the same for GraphSAGE (mean aggregator) over [precompute]'s [X | mean X].
# RUNS picks the trainings (every, f2, f5, cv-f2, cv-f5-draw2, cv-f10-draw2; all by default).
# DATA names another graph in the OGB raw layout with a public split, such as CiteSeer written
# by bench/planetoid-to-ogb.py (the same settings: Kipf and Welling used them for both).
#
#     SEEDS="0 1 2" bench/control-variates-cora.sh [work-dir]
#     MODEL=sage bench/control-variates-cora.sh /tmp/graphflat-cv-cora-sage
#     DATA=/tmp/citeseer bench/control-variates-cora.sh /tmp/graphflat-cv-citeseer
#     MODEL=sage SEEDS="$(seq -s ' ' 0 19)" RUNS="every cv-f5-draw2" bench/control-variates-cora.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-cv-cora}
SEEDS=${SEEDS:-0 1 2}
MODEL=${MODEL:-gcn}
BIN=${BIN:-target/release/graphflat}
DATA=${DATA:-../shared/data/cora}
RUNS=${RUNS:-every f2 f5 cv-f2 cv-f5-draw2 cv-f10-draw2}
[ -x "$BIN" ] || cargo build --release
mkdir -p "$WORK"
[ -f "$WORK/graph/nodes/_SUCCESS" ] || $BIN import ogb "$DATA" --out "$WORK/graph" > /dev/null 2>&1
cat > "$WORK/precompute.toml" <<TOML
[precompute]
nodes = "$WORK/graph/nodes"
edges = "$WORK/graph/edges"
output = "$WORK/ax"
model = "$MODEL"
normalize_features = true
overwrite = true
TOML
$BIN run "$WORK/precompute.toml" > "$WORK/precompute.log" 2>&1

# flatten NAME FANOUTS: one-hop records over the product, listing the roots' in-neighbors
flatten() {
  local name=$1 fanouts=$2 sampler=uniform
  [ "$fanouts" = all ] && sampler=all
  cat > "$WORK/flat-$name.toml" <<TOML
[flatten]
nodes = "$WORK/ax"
edges = "$WORK/graph/edges"
output = "$WORK/flat-$name"
overwrite = true
hops = 1
sampler = "$sampler"
root_neighbors = true
$([ "$fanouts" = all ] || echo "fanouts = $fanouts")
TOML
  $BIN run "$WORK/flat-$name.toml" > "$WORK/flat-$name.log" 2>&1
}

# train NAME RECORDS SEED [KEYS...]
train() {
  local name=$1 records=$2 seed=$3
  shift 3
  case " $RUNS " in *" $name "*) ;; *) return 0 ;; esac
  cat > "$WORK/$name.toml" <<TOML
[cluster]
workers = 1
[train]
records = "$WORK/flat-$records"
output = "$WORK/model-$name"
overwrite = true
model = "$MODEL"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4
epochs = 200
batch_size = 140
normalize_features = false
cache_mb = 1024
kernel_threads = 1
seed = $seed
$(printf '%s\n' "$@")
TOML
  $BIN run "$WORK/$name.toml" > "$WORK/$name.log" 2>&1
  local size accuracy seconds
  size=$(du -sk "$WORK/flat-$records" | cut -f1)
  seconds=$(grep -o 'train finished in [0-9.]*s' "$WORK/$name.log" | grep -o '[0-9.]*')
  accuracy=$(grep -o 'test accuracy there [0-9.]*' "$WORK/$name.log" | grep -o '[0-9.]*$')
  echo "$name seed $seed: records ${size} kB, train ${seconds}s, test accuracy $accuracy"
}

for f in all "[2]" "[5]" "[10]"; do flatten "$(echo "$f" | tr -d '[]')" "$f"; done
for seed in $SEEDS; do
  train every all "$seed"
  train f2 2 "$seed"
  train f5 5 "$seed"
  train cv-f2 2 "$seed" "control_variate = true"
  train cv-f5-draw2 5 "$seed" "control_variate = true" "control_variate_fanout = 2"
  train cv-f10-draw2 10 "$seed" "control_variate = true" "control_variate_fanout = 2"
done
