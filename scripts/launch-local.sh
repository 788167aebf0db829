#!/usr/bin/env bash
# Runs a job on N processes of this machine, as on N machines: process i is
# `graphflat run JOB --processes N --process i`, over loopback (127.0.0.1:2101, :2102, ...
# unless the job's [cluster] names hosts). Extra arguments go to every process.
#
#     scripts/launch-local.sh 3 jobs/quickstart.toml --workers 2
#
# The first process to fail stops the others (the cluster layer would end them within its
# bound anyway; this is faster). The script's exit code is the first failure's, so a scheduler
# sees the cause (see docs/failures.md), or 0 when every process succeeded; on TERM or
# INT it stops every process and exits 143 or 130.
set -uo pipefail
if [ $# -lt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N JOB.toml [graphflat run options...]" >&2
  exit 64
fi
n=$1; job=$2; shift 2
bin=${GRAPHFLAT:-$(dirname "$0")/../target/release/graphflat}
[ -x "$bin" ] || bin=$(command -v graphflat) || { echo "no graphflat binary: cargo build --release, or set GRAPHFLAT" >&2; exit 64; }

# The processes still running, by pid.
declare -A running=()
for ((i = 0; i < n; i++)); do
  "$bin" run "$job" --processes "$n" --process "$i" "$@" &
  running[$!]=1
done
stop() { [ ${#running[@]} -eq 0 ] || kill -TERM "${!running[@]}" 2>/dev/null; }
signalled=0
trap 'signalled=143; stop' TERM
trap 'signalled=130; stop' INT

status=0
while [ ${#running[@]} -gt 0 ]; do
  # Until a process ends or a trapped signal arrives; then collect every process that ended
  # (one still listed by `kill -0` has not: a zombie is reaped by the next `wait -n`).
  wait -n 2>/dev/null
  for pid in "${!running[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid" 2>/dev/null
    code=$?
    unset "running[$pid]"
    if [ "$code" -ne 0 ] && [ "$status" -eq 0 ] && [ "$signalled" -eq 0 ]; then
      status=$code
      echo "launch-local: process with pid $pid exited with $code; stopping the others" >&2
      stop
    fi
  done
done
[ "$signalled" -eq 0 ] || exit "$signalled"
exit "$status"
