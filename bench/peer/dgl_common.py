"""Loading shared by the DGL peers: the project's node and edge Parquet tables, read with
pyarrow, ids mapped to positions, as a DGL graph (edges src -> dst, messages flow to dst)."""
import numpy as np
import pyarrow.parquet as pq
import torch

import dgl


def load(nodes_dir, edges_dir, columns=("node_id", "features")):
    nodes = pq.read_table(nodes_dir, columns=list(columns))
    ids = nodes["node_id"].to_numpy()
    n = len(ids)
    features = nodes["features"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(n, -1)
    edges = pq.read_table(edges_dir, columns=["src", "dst"])
    order = np.argsort(ids)
    sorted_ids = ids[order]
    src = order[np.searchsorted(sorted_ids, edges["src"].to_numpy())]
    dst = order[np.searchsorted(sorted_ids, edges["dst"].to_numpy())]
    graph = dgl.graph((src, dst), num_nodes=n)
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    return graph, x, nodes
