#!/usr/bin/env bash
# What this project's own readers see while a job replaces their input (BENCHMARKS section 24):
# a flatten overwrites its output REPS times, alternating every record with the train split's,
# while `graphflat inspect` (which reads every row group) runs in a loop and a training reads
# the records every epoch (no cache). For each binary: the inspects' exit codes (0: one version
# read whole; 75: its input replaced while it read), the training's exit code, and the time a
# reader's open takes (inspect of an unchanging output, the median of 20). NEW is this tree's
# binary, OLD one built at an earlier commit; both read one generated graph.
#
#   OLD=/tmp/graphflat-old bench/held.sh [work_dir] [nodes]   REPS=8
#
# Build OLD with `git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release)`.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-held}
NODES=${2:-100000}
REPS=${REPS:-8}
OLD=${OLD:?set OLD to a graphflat binary built at the commit to compare with}
NEW=${NEW:-$PWD/target/release/graphflat}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); $NODES nodes, $REPS overwrites"
[ -f "$WORK/g/edges/_SUCCESS" ] ||
  "$NEW" generate --out "$WORK/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null

flatten() { # side targets
  printf '[flatten]\nnodes = "%s"\nedges = "%s"\noutput = "%s"\noverwrite = true\nfanouts = [10, 10]\n%s\n' \
    "$WORK/g/nodes" "$WORK/g/edges" "$WORK/$1/flat" "$2"
}

for side in old new; do
  bin=$OLD; [ $side = new ] && bin=$NEW
  rm -rf "${WORK:?}/$side" && mkdir -p "$WORK/$side"
  flatten $side "" > "$WORK/$side/all.toml"
  flatten $side 'targets = ["train"]' > "$WORK/$side/train.toml"
  printf '[train]\nrecords = "%s"\noutput = "%s"\nepochs = 100000\npatience = 0\ncache_mb = 0\n' \
    "$WORK/$side/flat" "$WORK/$side/model" > "$WORK/$side/learn.toml"
  "$bin" run "$WORK/$side/all.toml" > /dev/null 2>&1
  opens=$(for _ in $(seq 20); do
    s=$(date +%s%N); "$bin" inspect "$WORK/$side/flat" > /dev/null; echo $(( ($(date +%s%N) - s) / 1000000 ))
  done | sort -n | sed -n 10p)
  "$bin" run "$WORK/$side/learn.toml" > "$WORK/$side/learn.log" 2>&1 &
  trainer=$!
  sleep 3
  (for rep in $(seq "$REPS"); do
    which=train; [ $((rep % 2)) = 0 ] && which=all
    "$bin" run "$WORK/$side/$which.toml" > /dev/null 2>&1
  done; touch "$WORK/$side/done") &
  codes=()
  while [ ! -f "$WORK/$side/done" ]; do
    code=0; "$bin" inspect "$WORK/$side/flat" > /dev/null 2>&1 || code=$?
    codes+=("$code")
  done
  wait $!
  trained=running; kill -0 $trainer 2> /dev/null || { wait $trainer && trained=0 || trained=$?; }
  [ "$trained" = running ] && { kill $trainer; wait $trainer || true; }
  kept=$(find "$WORK/$side" -maxdepth 1 -name '.flat.graphflat-*.kept' | wc -l)
  printf '%s: inspect %s ms; %s reads: %s exit 0, %s exit 75, %s other; the training: %s; kept versions beside: %s\n' \
    $side "$opens" ${#codes[@]} "$(printf '%s\n' "${codes[@]}" | grep -cx 0 || true)" \
    "$(printf '%s\n' "${codes[@]}" | grep -cx 75 || true)" \
    "$(printf '%s\n' "${codes[@]}" | grep -cvx '0\|75' || true)" "$trained" "$kept"
done
