#!/usr/bin/env bash
# GINE on a label only the edges carry, from 2-hop records at the default dropout (issue 51,
# BENCHMARKS section 11): the graph of tests/edge_models.rs (2,000 nodes, 4 classes, node
# features noise, homophily 0, 8 edge features), flattened with 2 hops twice (fanouts [10, 10],
# and every in-edge); ours trains GINE with every other [train] key at its default (hidden 16,
# dropout 0.5, 200 epochs, batches of 512, Adam 0.01, weight decay 5e-4) on one worker, once per
# seed; PyG's GINEConv (bench/peer/pyg_edge.py: two layers, hidden 16, dropout 0.5 before each,
# Adam 0.01, weight decay 5e-4, 200 full-batch epochs) with its MLPs `out` wide (PyG's usual
# `Linear(in, out) -> ReLU -> Linear(out, out)`, the last layer's 4 wide) and `hidden` wide (as
# ours since issue 51). BEFORE=<a graphflat binary> adds its runs, labelled "before" (e.g. one
# built at the commit before the fix). Per run: the first epoch's train loss, the epochs whose
# train loss is ln 4 to 0.01 (every prediction alike), the test accuracy after epochs 20, 50 and
# 200 and at the best validation epoch.
#
#   bench/edge-signal.sh [work_dir]     SEEDS="0 1 2" BEFORE=/path/to/graphflat PEER_PYTHON=/tmp/peer/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-edge-signal}
SEEDS=${SEEDS:-0 1 2}
PY=${PEER_PYTHON:-$(bench/peer/venv.sh)}
BIN=target/release/graphflat
cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); seeds $SEEDS"

G=$WORK/graph
if [ ! -f "$G/edges/_SUCCESS" ]; then
  $BIN generate --out "$G" --nodes 2000 --avg-degree 8 --feature-dim 6 --seed 7 --classes 4 --skew 0.2 \
    --homophily 0 --feature-signal 0 --edge-feature-dim 8 > "$WORK/generate.log" 2>&1
fi
: > "$WORK/runs.jsonl"
summary() { # LABEL METRICS.jsonl...: one line per run (and kept for the totals)
  python3 - "$WORK/runs.jsonl" "$@" <<'PY'
import json, math, sys
out = open(sys.argv.pop(1), "a")
for path in sys.argv[2:]:
    rows = [json.loads(line) for line in open(path)]
    at = lambda e: rows[min(e, len(rows)) - 1]["test_accuracy"]
    stuck = sum(abs(r["train_loss"] - math.log(4)) < 0.01 for r in rows)
    best = max(rows, key=lambda r: r["valid_accuracy"])  # the first best, as the trainer picks it
    run = path.split("/")[-2] if path.endswith("/metrics.jsonl") else path.split("/")[-1][: -len(".jsonl")]
    print(f"{sys.argv[1]:<30} {run:<20} | {rows[0]['train_loss']:7.2f} | {stuck:3d} | "
          f"{at(20):.3f} | {at(50):.3f} | {at(200):.3f} | {best['test_accuracy']:.3f}")
    out.write(json.dumps({"label": sys.argv[1], "stuck": stuck, "at20": at(20), "best": best["test_accuracy"]}) + "\n")
PY
}
echo "run                            model or peer run    | epoch-1 loss | epochs at ln 4 | test @20 | @50 | @200 | at best valid"
for SAMPLING in fanouts all; do
  FLAT=$WORK/flat-$SAMPLING
  if [ "$SAMPLING" = fanouts ]; then KEYS='fanouts = [10, 10]'; else KEYS='sampler = "all"'; fi
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s/nodes"\nedges = "%s/edges"\noutput = "%s"\noverwrite = true\nhops = 2\n%s\nseed = 7\n' \
    "$G" "$G" "$FLAT" "$KEYS" > "$WORK/flatten-$SAMPLING.toml"
  $BIN run "$WORK/flatten-$SAMPLING.toml" > "$WORK/flatten-$SAMPLING.log" 2>&1
  for VERSION in ${BEFORE:+before} after; do
    if [ "$VERSION" = before ]; then RUN=$BEFORE; else RUN=$BIN; fi
    for SEED in $SEEDS; do
      M=$WORK/$VERSION-$SAMPLING-seed$SEED
      printf '[cluster]\nworkers = 1\n[train]\nrecords = "%s"\noutput = "%s"\noverwrite = true\nmodel = "gine"\nseed = %s\n' \
        "$FLAT" "$M" "$SEED" > "$M.toml"
      $RUN run "$M.toml" > "$M.log" 2>&1 || { tail "$M.log"; exit 1; }
      summary "ours $VERSION, $SAMPLING" "$M/metrics.jsonl"
    done
  done
done
for MLP in out hidden; do
  # shellcheck disable=SC2086
  "$PY" bench/peer/pyg_edge.py "$G" --models gine --with-edges-only --seeds $SEEDS --gine-mlp "$MLP" \
    --metrics "$WORK/pyg-$MLP" > "$WORK/pyg-$MLP.json" 2> "$WORK/pyg-$MLP.log"
  for SEED in $SEEDS; do summary "PyG GINEConv, MLP $MLP wide" "$WORK/pyg-$MLP/pyg_gine-seed$SEED.jsonl"; done
done
echo "totals: runs, runs with 20 or more epochs at ln 4, mean test accuracy after epoch 20, at the best validation epoch (mean, lowest)"
python3 - "$WORK/runs.jsonl" <<'PY'
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
for label in dict.fromkeys(r["label"] for r in runs):
    mine = [r for r in runs if r["label"] == label]
    best = [r["best"] for r in mine]
    print(f"{label:<30} {len(mine):3d} | {sum(r['stuck'] >= 20 for r in mine):3d} | "
          f"{sum(r['at20'] for r in mine) / len(mine):.3f} | {sum(best) / len(best):.3f}, {min(best):.3f}")
PY
