#!/usr/bin/env bash
# The job's report in a real browser. Runs the quickstart pipeline (jobs/quickstart.toml) in a
# scratch directory, builds one page per stage with `graphflat report`, loads each in headless
# Chromium (Debian's `chromium` package) and fails on any console message; saves the
# screenshots shown in docs/report.md as docs/report-<stage>.png. Not part of CI: Chromium and its
# libraries are about 300 MB to install; the tests check the page's content and that it is
# self-contained (tests/report.rs).
#
#   bash bench/report-browser.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
command -v chromium >/dev/null || { echo "needs Chromium: apt-get install chromium" >&2; exit 1; }
cargo build --release -q
bin=$repo/target/release/graphflat
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && "$bin" run "$repo/jobs/quickstart.toml" > /dev/null 2>&1)

chrome() {
  # The flags of a closed network: no background connections, no sandbox as root.
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 "$@" 2>&1
}

# The check can fail: a page that writes to the console is caught.
echo '<html><body><script>console.error("probe")</script></body></html>' > "$work/probe.html"
if ! chrome --dump-dom "file://$work/probe.html" | grep -q ':CONSOLE'; then
  echo "Chromium's console messages are not in its log: the check below would pass anything" >&2
  exit 1
fi

status=0
for stage in flatten:flat train:model infer:scores; do
  name=${stage%%:*}
  "$bin" report "$work/data/quickstart/${stage#*:}" --out "$work/$name.html" > /dev/null
  log=$(chrome --window-size=1340,900 --screenshot="$repo/docs/report-$name.png" "file://$work/$name.html")
  if grep ':CONSOLE' <<< "$log"; then
    echo "$name: console messages above" >&2
    status=1
  fi
  echo "$name: loaded, no console messages; docs/report-$name.png"
done
# The whole job's page (the one `run` wrote beside each output) loads as well.
log=$(chrome --dump-dom "file://$work/data/quickstart/scores/report.html")
grep -q '<h1>graphflat report' <<< "$log" || { echo "the job's page did not load" >&2; status=1; }
if grep ':CONSOLE' <<< "$log"; then status=1; fi
exit $status
