#!/usr/bin/env bash
# The commit's switch and what directory readers see while a job replaces its output
# (BENCHMARKS section 24): the 1M flatten (one worker, fanouts [10, 10]) overwriting its output
# REPS times, alternating every record with the train split's (two versions of different
# sizes), while pandas (`read_parquet(dir)`) and DuckDB (`read_parquet('dir/*.parquet')`) read
# the root ids in a loop (python/tests/read_loop.py). For each binary: the switch as it logs
# it, the whole command, and the readers' reads: whole (one version's rows, no root twice),
# mixed, or "not found". NEW is this tree's binary, OLD one built at an earlier commit; both
# read one generated graph.
#
#   OLD=/tmp/graphflat-old PYTHON=.ci/venv/bin/python bench/switch.sh [work_dir] [nodes]   REPS=4
#
# Build OLD with `git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release)`.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-switch}
NODES=${2:-1000000}
REPS=${REPS:-4}
OLD=${OLD:?set OLD to a graphflat binary built at the commit to compare with}
NEW=${NEW:-$PWD/target/release/graphflat}
PYTHON=${PYTHON:-.ci/venv/bin/python}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"
[ -f "$WORK/g/edges/_SUCCESS" ] ||
  "$NEW" generate --out "$WORK/g" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > /dev/null

job() { # side targets
  cat <<EOF
[cluster]
workers = 1
[flatten]
nodes = "$WORK/g/nodes"
edges = "$WORK/g/edges"
output = "$WORK/$1/flat"
overwrite = true
fanouts = [10, 10]
$2
EOF
}

for side in old new; do
  bin=$OLD; [ $side = new ] && bin=$NEW
  mkdir -p "$WORK/$side"
  job $side "" > "$WORK/$side/all.toml"
  job $side 'targets = ["train"]' > "$WORK/$side/train.toml"
  "$bin" run "$WORK/$side/all.toml" > /dev/null 2>&1
  rm -f "$WORK/$side/stop"
  "$PYTHON" python/tests/read_loop.py "$WORK/$side/flat" root_id "$WORK/$side/stop" > "$WORK/$side/reads.jsonl" &
  readers=$!
  for rep in $(seq "$REPS"); do
    which=train; [ $((rep % 2)) = 0 ] && which=all
    start=$(date +%s.%N)
    RUST_LOG=info "$bin" run "$WORK/$side/$which.toml" > /dev/null 2> "$WORK/$side/run-$rep.log"
    took=$(echo "$(date +%s.%N) - $start" | bc)
    switch=$(grep -o 'the switch took [0-9.]* s' "$WORK/$side/run-$rep.log" | head -1 || true)
    echo "$side rep $rep ($which): whole command ${took} s; ${switch:-no switch logged}"
  done
  touch "$WORK/$side/stop"
  wait "$readers"
  "$PYTHON" - "$WORK/$side/reads.jsonl" "$side" <<'EOF'
import json, sys
reads = [json.loads(line) for line in open(sys.argv[1])]
whole = [r for r in reads if "rows" in r]
sizes = sorted({r["rows"] for r in whole})
# A version's size is one the reads saw more than once with no repeated root; anything else mixed.
versions = {s for s in sizes if sum(1 for r in whole if r["rows"] == s and r["distinct"] == s) > 1}
mixed = [r for r in whole if r["rows"] not in versions or r["distinct"] != r["rows"]]
missing = [r for r in reads if r.get("not_found")]
other = [r for r in reads if "error" in r and not r.get("not_found")]
print(f"{sys.argv[2]}: {len(reads)} reads: {len(whole) - len(mixed)} whole, {len(mixed)} mixed, "
      f"{len(missing)} not found, {len(other)} other errors; versions of {sorted(versions)} rows")
EOF
done
