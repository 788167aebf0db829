#!/usr/bin/env bash
# The cold build, timed and profiled (BENCHMARKS.md section 10): a build into an empty target
# directory with `--timings`, then the units that took longest. Run it with nothing
# else on the machine: on 2 cores the build is CPU-bound, so its wall time is about the sum of
# its units' seconds over 2.
#
#   bench/cold-build.sh quickstart [TARGET]  # what the README's first command builds
#   bench/cold-build.sh ci [TARGET]          # what .ci/run's test command builds (--no-run)
#
# TARGET defaults to /tmp/graphflat-cold-<kind>; it is removed first. The registry (~/.cargo)
# is used as it is: download time is not measured.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?quickstart or ci}
target=${2:-/tmp/graphflat-cold-$kind}
rm -rf "$target"
case $kind in
  quickstart) build=(cargo build --release) ;;
  ci) build=(cargo test --release --workspace --features gpu,hdfs --no-run) ;;
  *) echo "unknown kind $kind: quickstart or ci" >&2; exit 2 ;;
esac
start=$(date +%s)
CARGO_TARGET_DIR=$target "${build[@]}" --timings > "$target.log" 2>&1 || { tail -30 "$target.log"; exit 1; }
echo "$kind: $(($(date +%s) - start)) s wall, commit $(git rev-parse --short HEAD)"
python3 - "$target" << 'EOF'
import glob, json, re, sys
page = open(sorted(glob.glob(sys.argv[1] + "/cargo-timings/cargo-timing-2*.html"))[-1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", page, re.S).group(1))
print(f"{len(units)} units, {sum(u['duration'] for u in units):.0f} unit-seconds in all; the largest:")
for u in sorted(units, key=lambda u: -u["duration"])[:20]:
    print(f"{u['duration']:7.1f} s  {u['name']} {u['version']} {u.get('target', '')}")
EOF
