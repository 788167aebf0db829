# Sourced by the benchmark scripts: timing helpers over $WORK.

# timed NAME CMD...: runs CMD, keeps its output in $WORK/NAME.log, prints "seconds peak_MB"
# (wall time and peak RSS from /usr/bin/time); on failure prints the log and exits.
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
  awk '{printf "%s %d", $1, $2 / 1024}' "$WORK/$name.time"
}

# median: the median of the numbers on stdin, one per line (the lower of the two middle ones).
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
