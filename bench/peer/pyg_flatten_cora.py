"""The peer of GraphFlat's Cora job (every node's full 2-hop in-neighborhood, sampler = "all"):
what a PyG user would write to materialize the same records. For every node, PyG's
`k_hop_subgraph` (flow source_to_target: the nodes whose messages reach it in 2 hops, relabeled
root first), the features gathered for those nodes, and one zstd Parquet file written by
pyarrow's `write_table` with its defaults, with the record columns GraphFlat writes: root_id,
label, node_ids, node_hops, node_features (list of fixed-size float lists), edge_src and edge_dst
(local indices). One thread. Prints the time, microseconds per node and the output's size.

    python bench/peer/pyg_flatten_cora.py ../shared/data/cora OUT.parquet
"""
import gzip
import os
import resource
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch_geometric.utils import k_hop_subgraph


def read(path, dtype):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=1)


def hops_of(subset, edges, root, k):
    """Each node's distance to the root along in-edges (BFS inside the subgraph)."""
    hop = np.full(len(subset), k, dtype=np.uint8)
    hop[0] = 0
    frontier = np.array([0])
    for d in range(1, k):
        reached = edges[0][np.isin(edges[1], frontier)]
        fresh = reached[hop[reached] > d]
        hop[fresh] = d
        frontier = np.unique(fresh)
    return hop


def main():
    root_dir, out = sys.argv[1], sys.argv[2]
    k = 2
    torch.set_num_threads(1)
    started = time.time()
    x = read(f"{root_dir}/raw/node-feat.csv.gz", np.float32)
    y = read(f"{root_dir}/raw/node-label.csv.gz", np.int64).reshape(-1)
    edge_index = torch.from_numpy(read(f"{root_dir}/raw/edge.csv.gz", np.int64)).t().contiguous()
    n, dim = x.shape
    load = time.time() - started

    started = time.time()
    columns = {c: [] for c in ["root_id", "label", "node_ids", "node_hops", "node_features", "edge_src", "edge_dst"]}
    for node in range(n):
        # Root first: k_hop_subgraph returns the subset sorted, so move the root to the front.
        subset, edges, _, _ = k_hop_subgraph(node, k, edge_index, relabel_nodes=False, flow="source_to_target")
        subset = subset.numpy()
        order = np.concatenate(([node], subset[subset != node]))
        local = np.empty(n, dtype=np.int64)
        local[order] = np.arange(len(order))
        edges = local[edges.numpy()]
        columns["root_id"].append(node)
        columns["label"].append(int(y[node]))
        columns["node_ids"].append(order)
        columns["node_hops"].append(hops_of(order, edges, node, k))
        columns["node_features"].append(x[order])
        columns["edge_src"].append(edges[0].astype(np.int32))
        columns["edge_dst"].append(edges[1].astype(np.int32))
    flatten = time.time() - started

    started = time.time()
    lengths = np.array([len(f) for f in columns["node_features"]])
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    rows = pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(columns["node_features"]).reshape(-1)), dim)
    table = pa.table({
        "root_id": pa.array(columns["root_id"], pa.int64()),
        "label": pa.array(columns["label"], pa.int64()),
        "node_ids": pa.array(columns["node_ids"], pa.list_(pa.int64())),
        "node_hops": pa.array(columns["node_hops"], pa.list_(pa.uint8())),
        "node_features": pa.ListArray.from_arrays(offsets, rows),
        "edge_src": pa.array(columns["edge_src"], pa.list_(pa.int32())),
        "edge_dst": pa.array(columns["edge_dst"], pa.list_(pa.int32())),
    })
    pq.write_table(table, out, compression="zstd")
    write = time.time() - started
    total = flatten + write
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pyg k_hop_subgraph: {n} records, {lengths.sum()} node rows: load {load:.2f}s, subgraphs {flatten:.2f}s, "
          f"write {write:.2f}s, total {total:.2f}s ({total / n * 1e6:.0f} us/node), "
          f"output {os.path.getsize(out) / 1e6:.2f} MB, peak {peak:.0f} MB")


if __name__ == "__main__":
    main()
