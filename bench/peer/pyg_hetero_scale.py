"""The peer of bench/hetero-scale.sh: PyG on the typed graph `graphflat generate --hetero`
writes (users, items, shops; buys, returns, follows and sells, every relation reversed as
`rev_<name>`), one thread, one phase per process (so each phase's peak memory is its own):

- `sample`: `NeighborLoader` over every train user, FANOUT in-edges per relation and hop (as
  `fanouts = [F, F]` per relation), batches of 256, no model: the sampled subgraphs per second
  against GraphFlat's records per second.
- `epoch`: one training epoch of `to_hetero(SAGE)` (the model of bench/peer/pyg_hetero.py,
  hidden 32) over the same loader, Adam lr 0.01.
- `infer`: the tables loaded and the full-graph forward pass (evaluation mode) of the same
  model, untrained: every user's scores, as GraphInfer's every node; seconds include the load.

Prints one JSON line: the phase's seconds (load apart), its rate, and peak RSS in MB.

    $(bench/peer/venv-sampled.sh) bench/peer/pyg_hetero_scale.py GRAPH_DIR PHASE [--fanout 3]
"""
import argparse
import json
import resource
import time

import torch
import torch.nn.functional as F
from torch_geometric.loader import NeighborLoader

from pyg_hetero import Typed, typed


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def loader(data, fanout):
    fanouts = {k: [fanout, fanout] for k in data.edge_types}
    seeds = ("user", data["user"].train_mask)
    return NeighborLoader(data, num_neighbors=fanouts, batch_size=256, input_nodes=seeds, shuffle=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("graph")
    parser.add_argument("phase", choices=["sample", "epoch", "infer"])
    parser.add_argument("--fanout", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    start = time.perf_counter()
    data = typed(args.graph)
    load_s = time.perf_counter() - start
    classes = int(data["user"].y.max()) + 1
    model = Typed(data, args.hidden, classes)
    result = {"phase": args.phase, "load_s": round(load_s, 2)}
    if args.phase == "infer":
        model.eval()
        with torch.no_grad():
            start = time.perf_counter()
            scores = torch.softmax(model(data.x_dict, data.edge_index_dict), 1)
            result["forward_s"] = round(time.perf_counter() - start, 2)
        result["seconds"] = round(load_s + result["forward_s"], 2)
        result["nodes"] = sum(data[t].num_nodes for t in data.node_types)
        assert scores.shape[0] == data["user"].num_nodes
    else:
        batches = loader(data, args.fanout)
        seeds = int(data["user"].train_mask.sum())
        if args.phase == "epoch":
            with torch.no_grad():  # the lazy (-1) input widths
                model(data.x_dict, data.edge_index_dict)
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            model.train()
        start = time.perf_counter()
        for batch in batches:
            if args.phase == "epoch":
                optimizer.zero_grad()
                size = batch["user"].batch_size
                out = model(batch.x_dict, batch.edge_index_dict)[:size]
                F.cross_entropy(out, batch["user"].y[:size]).backward()
                optimizer.step()
        result["seconds"] = round(time.perf_counter() - start, 2)
        result["per_s"] = round(seeds / result["seconds"])
    result["peak_mb"] = peak_mb()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
