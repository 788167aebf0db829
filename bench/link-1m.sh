#!/usr/bin/env bash
# Link prediction at 1M nodes against PyG's `LinkNeighborLoader`, one worker / one thread each
# (issue 18). The graph: `graphflat generate` (NODES nodes, average degree 10, 32 features,
# power-law in-degrees, seed 1), its edges split by `split-edges` (5% valid, 10% test, seed 1),
# and a table of PAIRS random candidate (src, dst) node ids (numpy seed 1, pyarrow).
#
# `split-edges` runs without --undirected: the generated graph is directed, each edge stored
# once (at 100k nodes only 0.05% of the edges have their reverse in the table), and both sides
# predict directed edges `src -> dst` from in-neighborhoods. --undirected is for a graph that
# stores both directions of an edge, so that one direction cannot leak the other.
#
# Per rep, ours then the peer's, on the same tables:
# 1. GraphFlat `task = "link"`, fanouts [10, 10], one uniform negative, `supervision_fraction =
#    0.1` (a hash-seeded 10% of the edges of every split: the train records are trained on, the
#    valid and test ones evaluated): wall seconds, link records/s, bytes of records (du), peak RSS;
# 2. GraphTrainer, GraphSAGE 32 -> 64 -> 64, dot decoder, in-batch negatives, batches of 512,
#    Adam 0.01, no dropout or weight decay, EPOCHS epochs (each: the training pass, then the
#    valid and test records scored): seconds per epoch and waiting for data (timings.jsonl),
#    peak RSS;
# 3. GraphInfer: every node's embedding (the trained fanouts), then the PAIRS candidate pairs
#    scored by the decoder (`pairs`, `pairs_output`): wall seconds and the logged phases, peak RSS;
#    and the same with every in-edge (model.json's sampler set to "all" by
#    bench/all_edges_model.py), the graph PyG's full-graph inference aggregates over;
# 4. bench/peer/pyg_link_sampled.py: the same model, batch size and share of supervision edges,
#    `LinkNeighborLoader` with num_neighbors [10, 10] and one binary negative per positive,
#    EPOCHS epochs (training pass and valid/test evaluation, timed apart); then full-graph
#    inference of every node's embedding and the dot scores of the same pairs, both written as
#    zstd Parquet; peak RSS of each process.
# Medians over REPS runs (every epoch of every run for the epoch time). Three separate job files
# (one stage each, workers = 1, kernel_threads = 1) so that /usr/bin/time gives each stage's
# peak. PEER_PYTHON needs torch-sparse (bench/peer/venv-sampled.sh makes such a venv).
#
# With LEARNED=D (D > 0) the graph is featureless: both sides read a copy of the node table
# without its `features` column (pyarrow, $WORK/bare/nodes; the edges are the same) and learn a
# D-wide vector per node as the model input instead: ours `learned_embedding_dim = D` in [train]
# (lazy Adam on the parameter server, the default, lr 0.01), so GraphSAGE D -> 64 -> 64; PyG
# `--learned-dim D`, a `torch.nn.Embedding(N, D, sparse=True)` indexed by each batch's sampled
# node ids and stepped by `SparseAdam` lr 0.01 beside Adam for the SAGE weights. Our training
# summary's `learned:` line (rows, the largest share with the optimizer's state) is printed.
# LEARNED=0 (the default) is the run with the 32 generated features.
#
# NEGATIVES: our trainer's `batch_negatives` (default `destinations`, the batch's destinations
# as each source's extra negatives, the key the feature runs set); NEGATIVES=default leaves the
# key out, so the link default applies (the other records' drawn negatives: a uniform pool,
# drawn anew by each batch's make-up every epoch).
#
#   bench/link-1m.sh [work_dir]     NODES=1000000 PAIRS=10000000 REPS=3 EPOCHS=3 LEARNED=0
#                                   PEER_PYTHON=/tmp/peer-sampled/bin/python BIN=target/release/graphflat
# BIN: use that binary and skip the build (default: cargo build --release, with FEATURES).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/graphflat-link-1m}
NODES=${NODES:-1000000}
PAIRS=${PAIRS:-10000000}
REPS=${REPS:-3}
EPOCHS=${EPOCHS:-3}
LEARNED=${LEARNED:-0}
NEGATIVES=${NEGATIVES:-destinations}
NEGATIVES_KEY="batch_negatives = \"$NEGATIVES\""; [ "$NEGATIVES" != default ] || NEGATIVES_KEY=""
PY=${PEER_PYTHON:-$(bench/peer/venv-sampled.sh)}
if [ -z "${BIN:-}" ]; then
  BIN=target/release/graphflat
  cargo build --release --quiet ${FEATURES:+--features "$FEATURES"}
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); commit $(git rev-parse --short HEAD); $NODES nodes, $PAIRS pairs, $REPS reps, $EPOCHS epochs, learned $LEARNED, negatives $NEGATIVES; load average $(cut -d' ' -f1-3 /proc/loadavg)"
export OMP_NUM_THREADS=1

timed() { # NAME CMD...: prints "seconds peak_MB cpu%"
  local name=$1; shift
  /usr/bin/time -f "%e %M %P" -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log"; exit 1; }
  awk '{printf "%s %d %s", $1, $2 / 1024, $3}' "$WORK/$name.time"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
mb() { du -sb "$@" | awk '{s+=$1} END {printf "%.0f", s/1e6}'; }

G=$WORK/g; S=$WORK/s
[ -f "$G/edges/_SUCCESS" ] || $BIN generate --out "$G" --nodes "$NODES" --avg-degree 10 --feature-dim 32 --seed 1 > "$WORK/generate.log" 2>&1
if [ ! -f "$S/edges/_SUCCESS" ]; then
  rm -rf "$S"; mkdir -p "$S"; ln -s "$G/nodes" "$S/nodes"
  $BIN split-edges --edges "$G/edges" --out "$S/edges" --valid 0.05 --test 0.1 --seed 1 2>&1 | tail -1
fi
if [ ! -f "$WORK/pairs/pairs.parquet" ]; then # PAIRS uniform (src, dst) node ids
  mkdir -p "$WORK/pairs"
  "$PY" - "$G/nodes" "$PAIRS" "$WORK/pairs/pairs.parquet" <<'PY'
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
ids = np.sort(pq.read_table(sys.argv[1], columns=["node_id"]).column("node_id").to_numpy())
rng, n = np.random.default_rng(1), int(sys.argv[2])
src, dst = ids[rng.integers(0, len(ids), n)], ids[rng.integers(0, len(ids), n)]
pq.write_table(pa.table({"src": src, "dst": dst}), sys.argv[3], row_group_size=1 << 20)
PY
fi
# The graph both sides read: $S, or with LEARNED the same edges and the node table without features.
GRAPH=$S
if [ "$LEARNED" -gt 0 ]; then
  GRAPH=$WORK/bare
  if [ ! -f "$GRAPH/nodes/part-0.parquet" ]; then
    rm -rf "$GRAPH"; mkdir -p "$GRAPH/nodes"; ln -s "$S/edges" "$GRAPH/edges"
    "$PY" -c "import pyarrow.parquet as pq, sys; pq.write_table(pq.read_table(sys.argv[1]).drop_columns(['features']), sys.argv[2], compression='zstd')" \
      "$G/nodes" "$GRAPH/nodes/part-0.parquet"
  fi
fi
echo "tables: nodes $(mb "$GRAPH/nodes") MB, edges $(mb "$S/edges") MB, pairs $(mb "$WORK/pairs") MB; df: $(df -h "$WORK" | awk 'NR==2{print $4}') free"

cat > "$WORK/flatten.toml" <<TOML
[cluster]
workers = 1
[flatten]
nodes = "$GRAPH/nodes"
edges = "$GRAPH/edges"
output = "$WORK/flat"
overwrite = true
hops = 2
fanouts = [10, 10]
seed = 1
task = "link"
negatives = 1
supervision_fraction = 0.1
TOML
LEARNED_KEY=""; [ "$LEARNED" -eq 0 ] || LEARNED_KEY="learned_embedding_dim = $LEARNED"
cat > "$WORK/train.toml" <<TOML
[cluster]
workers = 1
[train]
records = "$WORK/flat"
output = "$WORK/model"
overwrite = true
task = "link"
model = "sage"
hidden = 64
embedding_dim = 64
decoder = "dot"
$NEGATIVES_KEY
dropout = 0.0
weight_decay = 0.0
lr = 0.01
epochs = $EPOCHS
batch_size = 512
kernel_threads = 1
seed = 1
$LEARNED_KEY
TOML
cat > "$WORK/infer.toml" <<TOML
[cluster]
workers = 1
[infer]
nodes = "$GRAPH/nodes"
edges = "$GRAPH/edges"
model = "$WORK/model"
output = "$WORK/embeddings"
overwrite = true
pairs = "$WORK/pairs"
pairs_output = "$WORK/pair-scores"
TOML
sed -e "s|$WORK/model\"|$WORK/model-all\"|" -e "s|$WORK/embeddings|$WORK/embeddings-all|" -e "s|$WORK/pair-scores|$WORK/pair-scores-all|" \
  "$WORK/infer.toml" > "$WORK/infer-all.toml"

for f in flatten train infer infer-all pyg-train pyg-infer; do : > "$WORK/$f.runs"; done
: > "$WORK/epochs.runs"; : > "$WORK/pyg-epochs.runs"
for rep in $(seq "$REPS"); do
  read -r FS FM FP <<< "$(timed flatten $BIN run "$WORK/flatten.toml")"
  RECORDS=$("$PY" -c "import json, sys, pyarrow.parquet as pq; print(json.loads(pq.read_metadata(sys.argv[1]).metadata[b'graphflat.manifest'])['rows'])" "$WORK/flat/_manifest.parquet")
  echo "$FS $FM $FP $RECORDS $(mb "$WORK/flat")" >> "$WORK/flatten.runs"
  echo "rep $rep flatten: ${FS}s, $RECORDS link records, $(echo "$RECORDS / $FS" | bc) records/s, $(mb "$WORK/flat") MB, peak ${FM} MB, cpu $FP"
  grep -h "phases:" "$WORK/flatten.log" | sed 's/^ */  /' || true

  read -r TS TM TP <<< "$(timed train $BIN run "$WORK/train.toml")"
  echo "$TS $TM $TP" >> "$WORK/train.runs"
  python3 - "$WORK/model" "$rep" "$TS" "$TM" "$TP" >> "$WORK/epochs.runs" <<'PY'
import json, sys
m = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl")]
for t, e in zip((json.loads(l) for l in open(f"{sys.argv[1]}/timings.jsonl")), m):
    phases = " ".join(f"{t.get(k + '_seconds', 0):.2f}" for k in ["build", "forward", "backward", "exchange"])
    print(f"{t['seconds']:.2f} {t['wait_seconds']:.2f} {t['records_per_second']:.0f} {e['valid_auc']:.4f} {e['test_auc']:.4f} {phases}")
PY
  echo "rep $rep train: whole command ${TS}s, peak ${TM} MB, cpu $TP; epochs (seconds, waited, train records/s, valid auc, test auc; build, forward, backward, exchange seconds):"
  tail -n "$EPOCHS" "$WORK/epochs.runs" | sed 's/^/  /'
  grep -h "learned" "$WORK/train.log" | sed 's/^ */  /' || true

  read -r IS IM IP <<< "$(timed infer $BIN run "$WORK/infer.toml")"
  echo "$IS $IM $IP" >> "$WORK/infer.runs"
  echo "rep $rep infer: ${IS}s, peak ${IM} MB, cpu $IP, $(mb "$WORK/embeddings") MB embeddings, $(mb "$WORK/pair-scores") MB pair scores"
  grep -h "phases:\|pairs" "$WORK/infer.log" | sed 's/^ */  /' || true
  "$PY" bench/all_edges_model.py "$WORK/model" "$WORK/model-all"
  read -r AS AM AP <<< "$(timed infer-all $BIN run "$WORK/infer-all.toml")"
  echo "$AS $AM $AP" >> "$WORK/infer-all.runs"
  echo "rep $rep infer, every in-edge: ${AS}s, peak ${AM} MB, cpu $AP"
  grep -h "phases:" "$WORK/infer-all.log" | sed 's/^ */  /' || true

  read -r PS PM PP <<< "$(timed pyg-train "$PY" bench/peer/pyg_link_sampled.py "$GRAPH" --stage train --model "$WORK/pyg-model.pt" --epochs "$EPOCHS" --seed 1 --learned-dim "$LEARNED")"
  echo "$PS $PM $PP" >> "$WORK/pyg-train.runs"
  python3 - "$WORK/pyg-train.log" >> "$WORK/pyg-epochs.runs" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["pyg_link_sampled_train"]
for e in r["epochs"]:
    print(e["seconds"], e["train_seconds"], e["train_loader_seconds"], e["eval_seconds"], e["eval_loader_seconds"], e["valid_auc"], e["test_auc"])
PY
  echo "rep $rep pyg train: whole command ${PS}s, peak ${PM} MB, cpu $PP"
  tail -n 1 "$WORK/pyg-train.log" | sed 's/^/  /'

  rm -rf "$WORK/pyg-out"
  read -r QS QM QP <<< "$(timed pyg-infer "$PY" bench/peer/pyg_link_sampled.py "$GRAPH" --stage infer --model "$WORK/pyg-model.pt" --pairs "$WORK/pairs" --out "$WORK/pyg-out" --learned-dim "$LEARNED")"
  echo "$QS $QM $QP" >> "$WORK/pyg-infer.runs"
  echo "rep $rep pyg infer: whole command ${QS}s, peak ${QM} MB, cpu $QP"
  tail -n 1 "$WORK/pyg-infer.log" | sed 's/^/  /'
done

col() { awk -v c="$2" '{print $c}' "$WORK/$1" | median; }
echo "medians of $REPS runs:"
FS=$(col flatten.runs 1); R=$(col flatten.runs 4)
echo "  flatten: ${FS}s, $(echo "$R / $FS" | bc) link records/s, $(col flatten.runs 5) MB, peak $(col flatten.runs 2) MB"
E=$(col epochs.runs 1); P=$(col pyg-epochs.runs 1)
echo "  epoch (train + valid/test): ours ${E}s (waited $(col epochs.runs 2)s), pyg ${P}s (train $(col pyg-epochs.runs 2)s, of it loader $(col pyg-epochs.runs 3)s; eval $(col pyg-epochs.runs 4)s); pyg / ours = $(echo "scale=2; $P / $E" | bc)x"
echo "  train peak: ours $(col train.runs 2) MB, pyg $(col pyg-train.runs 2) MB"
I=$(col infer.runs 1); Q=$(col pyg-infer.runs 1)
A=$(col infer-all.runs 1)
echo "  infer (embeddings + $PAIRS pairs, whole command): ours ${I}s (peak $(col infer.runs 2) MB), every in-edge ${A}s (peak $(col infer-all.runs 2) MB), pyg ${Q}s (peak $(col pyg-infer.runs 2) MB); pyg / ours = $(echo "scale=2; $Q / $I" | bc)x, $(echo "scale=2; $Q / $A" | bc)x"
