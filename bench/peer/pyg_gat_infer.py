"""The peer of GraphInfer for GAT with every in-edge: PyG's full-graph inference of a 2-layer
`GATConv` (hidden heads concatenated, one output head, self-loops added as PyG does, their edge
features the mean of the node's in-edges), with `--edge-dim E` reading the edge table's
`features` column, on the same Parquet node and edge tables, one thread. Prints load and
forward seconds and peak memory.

    python bench/peer/pyg_gat_infer.py NODES_DIR EDGES_DIR [--edge-dim E] [--hidden 16]
        [--heads 4] [--classes 8]
"""
import argparse
import resource
import time

import numpy as np
import pyarrow.parquet as pq
import torch
from torch_geometric.nn import GATConv


def flat(column, rows):
    return column.combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(rows, -1).copy()


def load(nodes_dir, edges_dir, edge_dim):
    nodes = pq.read_table(nodes_dir, columns=["node_id", "features"])
    ids = nodes["node_id"].to_numpy()
    order = np.argsort(ids)
    sorted_ids = ids[order]
    x = torch.from_numpy(np.ascontiguousarray(flat(nodes["features"], len(ids)), dtype=np.float32))
    columns = ["src", "dst"] + (["features"] if edge_dim else [])
    edges = pq.read_table(edges_dir, columns=columns)
    src = order[np.searchsorted(sorted_ids, edges["src"].to_numpy())]
    dst = order[np.searchsorted(sorted_ids, edges["dst"].to_numpy())]
    edge_index = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
    edge_attr = None
    if edge_dim:
        edge_attr = torch.from_numpy(np.ascontiguousarray(flat(edges["features"], edges.num_rows), dtype=np.float32))
    return x, edge_index, edge_attr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("nodes")
    parser.add_argument("edges")
    parser.add_argument("--edge-dim", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--classes", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.time()
    x, edge_index, edge_attr = load(args.nodes, args.edges, args.edge_dim)
    load_s = time.time() - started

    edge_dim = args.edge_dim or None
    first = GATConv(x.shape[1], args.hidden, heads=args.heads, edge_dim=edge_dim).eval()
    second = GATConv(args.hidden * args.heads, args.classes, heads=1, edge_dim=edge_dim).eval()
    started = time.time()
    with torch.no_grad():
        hidden = torch.nn.functional.elu(first(x, edge_index, edge_attr))
        scores = torch.softmax(second(hidden, edge_index, edge_attr), dim=1)
    forward = time.time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pyg gat (edge_dim {args.edge_dim}): {x.shape[0]} nodes, {edge_index.shape[1]} edges: load {load_s:.2f}s, "
          f"forward {forward:.2f}s, total {load_s + forward:.2f}s, peak {peak:.0f} MB ({scores.shape[0]} scored)")


if __name__ == "__main__":
    main()
