#!/usr/bin/env bash
# Cora (Planetoid public split) with GCN, GAT and GraphSAGE over 5 seeds each, the papers'
# settings, 200 epochs, k = 2 with every edge. Prints per-run and mean test accuracy, both at the
# last epoch and at the epoch of best validation accuracy.
#
#   bench/cora-train.sh [work_dir] [workers]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-cora-train}
WORKERS=${2:-2}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
[ -f "$WORK/cora/edges/_SUCCESS" ] || $BIN import ogb ../shared/data/cora --out "$WORK/cora" > /dev/null
cat > "$WORK/flatten.toml" <<TOML
[flatten]
nodes = "$WORK/cora/nodes"
edges = "$WORK/cora/edges"
output = "$WORK/flat"
hops = 2
sampler = "all"
TOML
[ -f "$WORK/flat/_SUCCESS" ] || $BIN run "$WORK/flatten.toml" --workers "$WORKERS" > /dev/null 2>&1

declare -A SETTINGS
SETTINGS[gcn]='model = "gcn"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4'
SETTINGS[gat]='model = "gat"
hidden = 8
heads = 8
output_heads = 1
dropout = 0.6
attention_dropout = 0.6
activation = "elu"
lr = 0.005
weight_decay = 5e-4'
SETTINGS[sage]='model = "sage"
hidden = 16
dropout = 0.5
lr = 0.01
weight_decay = 5e-4'

for model in gcn gat sage; do
  for seed in 0 1 2 3 4; do
    cat > "$WORK/$model-$seed.toml" <<TOML
[train]
records = "$WORK/flat"
output = "$WORK/model-$model-$seed"
epochs = 200
normalize_features = true
cache_mb = 2048
seed = $seed
${SETTINGS[$model]}
TOML
    rm -rf "$WORK/model-$model-$seed"
    start=$(date +%s.%N)
    $BIN run "$WORK/$model-$seed.toml" --workers "$WORKERS" > /dev/null 2>&1
    end=$(date +%s.%N)
    python3 - "$WORK/model-$model-$seed/timings.jsonl" "$model" "$seed" "$start" "$end" <<'PY'
import json, sys
timings = [json.loads(l) for l in open(sys.argv[1])]
rows = [json.loads(l) for l in open(sys.argv[1].replace("timings.jsonl", "metrics.jsonl"))]
best = max(rows, key=lambda r: (r["valid_accuracy"], -r["epoch"]))
epoch_s = sorted(r["seconds"] for r in timings)[len(timings) // 2]
print(f"{sys.argv[2]} seed {sys.argv[3]}: last-epoch test {rows[-1]['test_accuracy']:.4f}, "
      f"best-valid epoch {best['epoch']} test {best['test_accuracy']:.4f}, "
      f"median epoch {epoch_s:.3f}s, run {float(sys.argv[5]) - float(sys.argv[4]):.1f}s")
PY
  done
done | tee "$WORK/results.txt"
python3 - "$WORK/results.txt" <<'PY'
import re, sys, collections
last, best = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) seed \d+: last-epoch test ([\d.]+), best-valid epoch \d+ test ([\d.]+)", line)
    if m:
        last[m[1]].append(float(m[2])); best[m[1]].append(float(m[3]))
for model in last:
    print(f"{model}: mean over {len(last[model])} seeds: last epoch {sum(last[model])/len(last[model]):.4f}, "
          f"at best validation {sum(best[model])/len(best[model]):.4f}")
PY
