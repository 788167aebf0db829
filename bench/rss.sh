#!/usr/bin/env bash
# The graphflat binary with its peak RSS in MB written to $RSS_DIR/<pid>.rss, for benchmarks
# that start several processes (bench/storage.sh passes it to scripts/launch-local.sh).
mkdir -p "$RSS_DIR"
/usr/bin/time -f %M -o "$RSS_DIR/$$.kb" "$(dirname "$0")/../target/release/graphflat" "$@"
code=$?
echo $(($(tail -1 "$RSS_DIR/$$.kb") / 1024)) > "$RSS_DIR/$$.rss"
exit $code
