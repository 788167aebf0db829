#!/usr/bin/env bash
# What the readers' checks and the staged commit cost (BENCHMARKS section 18): the 1M flatten
# (one worker, fanouts [10, 10], overwriting its output, so every run publishes its parts and
# removes the previous run's) and a streamed training epoch on its records (GCN hidden 16, one
# worker and one kernel thread, the default 512 MB cache: the second epoch's time), with this
# tree's binary against OLD, a binary built at an earlier commit, alternating, REPS runs each.
# Each side reads tables it generated itself, in its own format. Also the commit's switch, as
# the new binary logs it ("the switch took").
#
#   OLD=/tmp/graphflat-old bench/commit.sh [work_dir] [nodes]        REPS=3 FEATURES=gpu,hdfs
#
# Build OLD with `git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release)`.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-commit}
NODES=${2:-1000000}
REPS=${REPS:-3}
OLD=${OLD:?set OLD to a graphflat binary built at the commit to compare with}
NEW=${NEW:-$PWD/target/release/graphflat}
[ -n "${NEW_BUILT:-}" ] || cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
source bench/timing.sh
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"

for side in old new; do
  bin=$OLD; [ $side = new ] && bin=$NEW
  mkdir -p "$WORK/$side"
  [ -f "$WORK/$side/g/edges/_SUCCESS" ] ||
    "$bin" generate --out "$WORK/$side/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null
  cat > "$WORK/$side/flatten.toml" <<EOF
[cluster]
workers = 1
[flatten]
nodes = "$WORK/$side/g/nodes"
edges = "$WORK/$side/g/edges"
output = "$WORK/$side/flat"
overwrite = true
fanouts = [10, 10]
EOF
  cat > "$WORK/$side/train.toml" <<EOF
[cluster]
workers = 1
[train]
records = "$WORK/$side/flat"
output = "$WORK/$side/model"
overwrite = true
epochs = 2
batch_size = 1024
kernel_threads = 1
EOF
done

second_epoch() { sed -n 2p "$1/model/timings.jsonl" | sed 's/.*"seconds":\([0-9.]*\).*/\1/'; }
for rep in $(seq "$REPS"); do
  for side in old new; do
    bin=$OLD; [ $side = new ] && bin=$NEW
    flatten=$(timed "$side-flatten-$rep" "$bin" run "$WORK/$side/flatten.toml")
    switch=$(grep -o 'the switch took [0-9.]* s' "$WORK/$side-flatten-$rep.log" | head -1 || true)
    train=$(timed "$side-train-$rep" "$bin" run "$WORK/$side/train.toml")
    echo "$side rep $rep: flatten ${flatten% *} s (peak ${flatten#* } MB)${switch:+, $switch}; second epoch $(second_epoch "$WORK/$side") s"
  done
done
