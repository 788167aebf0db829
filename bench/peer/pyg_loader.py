"""One side of bench/pyg-loader.sh: a pass of batches for PyTorch, one process, one thread.

`ours RECORDS`: `graphflat.open_records(RECORDS).batches(split, batch_size, shuffle=True)`,
each batch made into PyG data with `.to_pyg()` (a `torch_geometric.data.Batch`: every record's
2-hop neighborhood, its root first), over every record of the split (a full pass).

`pyg GRAPH_DIR`: the node table (`node_id`, `features`, `label`, `split`) and the edge table
(`src`, `dst`) of GRAPH_DIR loaded into memory as one `Data` (`x`, `edge_index`, `y`; edges are
in-edges of `dst`, PyG's default flow, as GraphFlat samples them), then PyG's
`NeighborLoader(data, num_neighbors=[10, 10], batch_size, shuffle=True, input_nodes=<the
split's nodes>)` (`num_workers = 0`: sampling and feature gathering inline) over every node of
the split: as many seeds as the records of the split, in batches of the same size.

Both: `torch.set_num_threads(1)` and Arrow's CPU pool at `--arrow-threads` (default 1). The
seconds (and the RSS after) of the imports, of opening (ours: the manifest and the footers; PyG: the tables read
into a `Data`, then the loader made, which builds the CSC index) and of the pass are apart;
records/s (seeds/s) are over the pass only (its CPU seconds too: the machine may be shared). Prints one JSON line, with the process's peak RSS
(`ru_maxrss`).

    python bench/peer/pyg_loader.py ours RECORDS [--split train] [--batch-size 512]
    python bench/peer/pyg_loader.py pyg GRAPH_DIR [--split train] [--batch-size 512]

`NeighborLoader` needs `pyg-lib` or `torch-sparse` (see bench/pyg-loader.sh).
"""

import argparse
import json
import resource
import sys
import time

started = time.perf_counter()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
import torch_geometric  # noqa: E402
import torch_geometric.typing  # noqa: E402
from torch_geometric.data import Data  # noqa: E402


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def rss_mb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS:"))


def ours(args, out):
    import graphflat
    import graphflat.pyg.data  # noqa: F401  (imported before the clock, as torch_geometric)

    out["imports_s"], out["imports_mb"] = time.perf_counter() - started, rss_mb()
    t = time.perf_counter()
    records = graphflat.open_records(args.path)
    out["open_s"] = time.perf_counter() - t
    split = None if args.split == "all" else args.split
    t, cpu = time.perf_counter(), time.process_time()
    seen = batches = nodes = edges = 0
    for batch in records.batches(split=split, batch_size=args.batch_size, shuffle=True, seed=args.seed):
        data = batch.to_pyg()
        seen += data.num_graphs
        nodes += data.num_nodes
        edges += data.num_edges
        batches += 1
    out["pass_s"], out["pass_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    out.update(seeds=seen, batches=batches, nodes_per_batch=nodes / batches, edges_per_batch=edges / batches)


def pyg(args, out):
    from torch_geometric.loader import NeighborLoader

    out["imports_s"], out["imports_mb"] = time.perf_counter() - started, rss_mb()
    out["sampler"] = (
        "pyg-lib" if torch_geometric.typing.WITH_PYG_LIB
        else "torch-sparse" if torch_geometric.typing.WITH_TORCH_SPARSE
        else "none"
    )
    t = time.perf_counter()
    nodes = pq.read_table(f"{args.path}/nodes", columns=["node_id", "features", "label", "split"])
    ids = nodes.column("node_id").to_numpy()
    features = nodes.column("features").combine_chunks()
    width = len(features[0])
    x = pc.list_flatten(features).to_numpy().astype(np.float32).reshape(len(ids), width)
    slot = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    slot[ids] = np.arange(len(ids))
    y = pc.fill_null(nodes.column("label"), -1).to_numpy().astype(np.int64)
    split = nodes.column("split")
    if args.split == "all":
        seeds = np.arange(len(ids))
    else:
        seeds = np.nonzero(pc.equal(pc.fill_null(split, ""), args.split).to_numpy(zero_copy_only=False))[0]
    edges = pq.read_table(f"{args.path}/edges", columns=["src", "dst"])
    src = slot[edges.column("src").to_numpy()]
    dst = slot[edges.column("dst").to_numpy()]
    del nodes, features, edges, split
    data = Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(np.stack([src, dst])),
        y=torch.from_numpy(y),
    )
    del src, dst
    out["load_s"], out["loaded_mb"] = time.perf_counter() - t, rss_mb()
    t = time.perf_counter()
    loader = NeighborLoader(
        data,
        num_neighbors=[10, 10],
        batch_size=args.batch_size,
        shuffle=True,
        input_nodes=torch.from_numpy(seeds),
    )
    out["loader_s"] = time.perf_counter() - t
    torch.manual_seed(args.seed)
    t, cpu = time.perf_counter(), time.process_time()
    seen = batches = nodes = edges = 0
    for batch in loader:
        seen += batch.batch_size
        nodes += batch.num_nodes
        edges += batch.num_edges
        batches += 1
    out["pass_s"], out["pass_cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
    out.update(seeds=seen, batches=batches, nodes_per_batch=nodes / batches, edges_per_batch=edges / batches)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("side", choices=["ours", "pyg"])
    parser.add_argument("path", help="ours: the record set; pyg: the directory of nodes/ and edges/")
    parser.add_argument("--split", default="train", help="a split, or 'all' for every record (node)")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arrow-threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pa.set_cpu_count(args.arrow_threads)
    out = {
        "side": args.side,
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "pyarrow": pa.__version__,
        "torch_threads": torch.get_num_threads(),
        "arrow_threads": pa.cpu_count(),
    }
    (ours if args.side == "ours" else pyg)(args, out)
    out["per_s"] = out["seeds"] / out["pass_s"]
    out["peak_mb"] = peak_mb()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
