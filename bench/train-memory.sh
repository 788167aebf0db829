#!/usr/bin/env bash
# GraphTrainer's memory against the number of records: the same job on records of a graph of
# N/2 and of N nodes (fanouts [10, 10], 32 features, every node a target; about half the
# records train and half evaluate). Reports peak RSS, the time to the first step, and the
# median epoch, for the default cache (cache_mb = 512) and for a cache that holds everything.
#
#   bench/train-memory.sh [work_dir] [nodes]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-train-memory}
NODES=${2:-1000000}
BIN=$PWD/target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"

for n in $((NODES / 2)) "$NODES"; do
  [ -f "$WORK/g$n/edges/_SUCCESS" ] || $BIN generate --out "$WORK/g$n" --nodes "$n" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
  cat > "$WORK/flatten-$n.toml" <<TOML
[flatten]
nodes = "$WORK/g$n/nodes"
edges = "$WORK/g$n/edges"
output = "$WORK/flat$n"
hops = 2
fanouts = [10, 10]
TOML
  [ -f "$WORK/flat$n/_SUCCESS" ] || $BIN run "$WORK/flatten-$n.toml" > /dev/null 2>&1
done

run() { # nodes cache_mb epochs
  local n=$1 cache=$2 epochs=$3 name="n$1-cache$2"
  cat > "$WORK/$name.toml" <<TOML
[train]
records = "$WORK/flat$n"
output = "$WORK/model-$name"
model = "gcn"
hidden = 16
epochs = $epochs
batch_size = 1024
cache_mb = $cache
TOML
  rm -rf "$WORK/model-$name"
  /usr/bin/time -v $BIN run "$WORK/$name.toml" --workers 1 > "$WORK/$name.out" 2> "$WORK/$name.log"
  python3 - "$WORK" "$name" "$(du -sm "$WORK/flat$n" | cut -f1)" <<'PY'
import json, re, sys
work, name, mb = sys.argv[1], sys.argv[2], sys.argv[3]
log = open(f"{work}/{name}.log").read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", log).group(1)) / 1e3
first = float(re.search(r"first step ([\d.]+)s", log).group(1))
rows = [json.loads(l) for l in open(f"{work}/model-{name}/timings.jsonl")]
mid = sorted(r["seconds"] for r in rows)[len(rows) // 2]
print(f"{name:22s} records {mb:>5s} MB: peak {rss:7.0f} MB, first step after {first:5.1f} s, median epoch {mid:6.2f} s")
PY
}

for n in $((NODES / 2)) "$NODES"; do
  run "$n" 512 2
done
run "$NODES" 16384 3
