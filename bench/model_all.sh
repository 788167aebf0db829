# Sourced by the benchmark scripts: all_edges_model WORK BIN makes WORK/model-all, a 2-layer GCN
# (16 hidden units) over 32 features that reads every in-edge: trained for one epoch on a small
# graph's records (timings do not depend on the weights), then set to `sampler = "all"`
# (bench/all_edges_model.py, run by $PYTHON, which needs pyarrow). Kept between runs.
all_edges_model() {
  local work=$1 bin=$2
  [ -f "$work/model-all/_SUCCESS" ] && return 0
  "$bin" generate --out "$work/small" --nodes 10000 --feature-dim 32 --seed 1 > /dev/null 2>&1
  printf '[cluster]\nworkers = 1\n[flatten]\nnodes = "%s/small/nodes"\nedges = "%s/small/edges"\noutput = "%s/small-records"\noverwrite = true\nhops = 2\nfanouts = [10, 10]\n[train]\nrecords = "%s/small-records"\noutput = "%s/model"\nepochs = 1\nhidden = 16\n' \
    "$work" "$work" "$work" "$work" "$work" > "$work/model.toml"
  "$bin" run "$work/model.toml" > "$work/model.log" 2>&1 || { cat "$work/model.log"; return 1; }
  "${PYTHON:-python3}" bench/all_edges_model.py "$work/model" "$work/model-all"
}
