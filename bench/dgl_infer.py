"""The peer of GraphInfer with sampler = "all": DGL's full-graph, layer-wise inference of a
2-layer GCN over every in-edge (with self-loops, symmetric normalization), on the same Parquet
node and edge tables, one thread. Prints load and forward seconds and peak memory.

    python bench/dgl_infer.py NODES_DIR EDGES_DIR [HIDDEN] [CLASSES]
"""
import resource
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import torch

import dgl
from dgl.nn import GraphConv


def main():
    nodes_dir, edges_dir = sys.argv[1], sys.argv[2]
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    classes = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    torch.set_num_threads(1)
    started = time.time()
    nodes = pq.read_table(nodes_dir, columns=["node_id", "features"])
    ids = nodes["node_id"].to_numpy()
    n = len(ids)
    features = nodes["features"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(n, -1)
    edges = pq.read_table(edges_dir, columns=["src", "dst"])
    order = np.argsort(ids)
    sorted_ids = ids[order]
    src = order[np.searchsorted(sorted_ids, edges["src"].to_numpy())]
    dst = order[np.searchsorted(sorted_ids, edges["dst"].to_numpy())]
    graph = dgl.add_self_loop(dgl.graph((src, dst), num_nodes=n))
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    load = time.time() - started

    first = GraphConv(x.shape[1], hidden, norm="both", activation=torch.relu)
    second = GraphConv(hidden, classes, norm="both")
    started = time.time()
    with torch.no_grad():
        scores = torch.softmax(second(graph, first(graph, x)), dim=1)
    forward = time.time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"dgl: {n} nodes, {graph.num_edges()} edges with self-loops: load {load:.2f}s, forward {forward:.2f}s, "
          f"total {load + forward:.2f}s, peak {peak:.0f} MB ({scores.shape[0]} scored)")


if __name__ == "__main__":
    main()
