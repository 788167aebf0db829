#!/usr/bin/env bash
# Runs a job on N processes of this machine, as on N machines: process i is
# `graphflat run JOB --processes N --process i`, over loopback (127.0.0.1:2101, :2102, ...
# unless the job's [cluster] names hosts). Extra arguments go to every process.
#
#     scripts/launch-local.sh 3 jobs/quickstart.toml --workers 2
#
# The first process to fail stops the others (the cluster layer would end them within its
# bound anyway; this is faster). The script's exit code is the first failure's, so a scheduler
# sees the cause (see the README's exit codes), or 0 when every process succeeded.
set -uo pipefail
if [ $# -lt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N JOB.toml [graphflat run options...]" >&2
  exit 64
fi
n=$1; job=$2; shift 2
bin=${GRAPHFLAT:-$(dirname "$0")/../target/release/graphflat}
[ -x "$bin" ] || bin=$(command -v graphflat) || { echo "no graphflat binary: cargo build --release, or set GRAPHFLAT" >&2; exit 64; }

pids=()
for ((i = 0; i < n; i++)); do
  "$bin" run "$job" --processes "$n" --process "$i" "$@" &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' INT TERM

status=0
for ((done = 0; done < n; done++)); do
  wait -n -p pid "${pids[@]}"
  code=$?
  if [ "$code" -ne 0 ] && [ "$status" -eq 0 ]; then
    status=$code
    echo "launch-local: process with pid $pid exited with $code; stopping the others" >&2
    kill -TERM "${pids[@]}" 2>/dev/null
  fi
done
exit "$status"
