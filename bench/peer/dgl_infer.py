"""The peer of GraphInfer with sampler = "all": DGL's full-graph, layer-wise inference of a
2-layer GCN over every in-edge (with self-loops, symmetric normalization), on the same Parquet
node and edge tables, one thread. Prints load and forward seconds and peak memory.

    python bench/peer/dgl_infer.py NODES_DIR EDGES_DIR [HIDDEN] [CLASSES]
"""
import resource
import sys
import time

import torch

import dgl
from dgl.nn import GraphConv
from dgl_common import load


def main():
    nodes_dir, edges_dir = sys.argv[1], sys.argv[2]
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    classes = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    torch.set_num_threads(1)
    started = time.time()
    graph, x, _ = load(nodes_dir, edges_dir)
    graph = dgl.add_self_loop(graph)
    n = graph.num_nodes()
    load_s = time.time() - started

    first = GraphConv(x.shape[1], hidden, norm="both", activation=torch.relu)
    second = GraphConv(hidden, classes, norm="both")
    started = time.time()
    with torch.no_grad():
        scores = torch.softmax(second(graph, first(graph, x)), dim=1)
    forward = time.time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"dgl: {n} nodes, {graph.num_edges()} edges with self-loops: load {load_s:.2f}s, forward {forward:.2f}s, "
          f"total {load_s + forward:.2f}s, peak {peak:.0f} MB ({scores.shape[0]} scored)")


if __name__ == "__main__":
    main()
