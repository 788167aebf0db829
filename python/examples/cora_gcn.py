"""Train a GCN in PyTorch on Cora's records, then hand it to GraphInfer.

The records come from graphflat (the repository's docs/pytorch.md):

    graphflat import ogb ../shared/data/cora --out data/cora
    graphflat run jobs/cora.toml                     # data/cora/flat: exact 2-hop records

then

    python python/examples/cora_gcn.py data/cora/flat data/cora/model-pytorch \
        --graphflat target/release/graphflat --nodes data/cora/nodes --edges data/cora/edges

trains Kipf and Welling's GCN (hidden 16, dropout 0.5, Adam lr 0.01, weight decay 5e-4, 200
full-batch epochs over the 140 training records, row-normalized features), prints its
accuracy on each split's records after the last epoch, and commits the model
with ``graphflat.pyg.save_model``. With ``--graphflat``, it then runs GraphInfer on the graph
itself (no records) with that model and prints GraphInfer's test accuracy: the same number.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import torch
from torch.nn import functional as F

import graphflat
from graphflat.pyg import GCN, save_model


def accuracy(model: torch.nn.Module, batches: list) -> float:
    """The share of labeled records whose root's largest logit is its class."""
    model.eval()
    with torch.no_grad():
        hits = [(model(b).argmax(1) == b.y)[b.y >= 0] for b in batches]
    return torch.cat(hits).float().mean().item()


def train(records: graphflat.Records, epochs: int, seed: int) -> tuple[torch.nn.Module, dict[str, float]]:
    """The model after ``epochs`` full-batch epochs, and its accuracy on each split's records."""
    torch.manual_seed(seed)
    batches = {
        s: [b.to_pyg() for b in records.batches(s, batch_size=1024, shuffle=False)] for s in ("train", "valid", "test")
    }
    classes = int(max(b.y.max() for b in batches["train"])) + 1
    model = GCN(records.meta, hidden=16, classes=classes, normalize_features=True, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        model.train()
        for batch in batches["train"]:  # Cora's 140 training records: one step an epoch
            optimizer.zero_grad()
            F.cross_entropy(model(batch), batch.y).backward()
            optimizer.step()
    return model.eval(), {split: accuracy(model, b) for split, b in batches.items()}


def graphinfer_accuracy(binary: str, nodes: str, edges: str, model: str) -> float:
    """GraphInfer's test accuracy with the committed model: its predictions against the node
    table's labels on the test split."""
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "infer.toml"
        scores = Path(tmp) / "scores"
        job.write_text(f'[infer]\nnodes = "{nodes}"\nedges = "{edges}"\nmodel = "{model}"\noutput = "{scores}"\n')
        subprocess.run([binary, "run", str(job)], check=True, stdout=subprocess.DEVNULL)
        predicted = graphflat.read_table(str(scores), columns=["node_id", "prediction"])
        table = graphflat.read_table(nodes, columns=["node_id", "label", "split"])
    test = table.filter(pc.equal(table["split"], "test"))
    order = np.argsort(predicted["node_id"].to_numpy())
    at = np.searchsorted(predicted["node_id"].to_numpy(), test["node_id"].to_numpy(), sorter=order)
    prediction = predicted["prediction"].to_numpy()[order[at]]
    return float(np.mean(prediction == test["label"].to_numpy()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", help="Cora's records (jobs/cora.toml's output)")
    parser.add_argument("output", help="where the trained model is committed (a model directory)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace a model committed at OUTPUT")
    parser.add_argument("--graphflat", help="the graphflat binary: run GraphInfer with the model")
    parser.add_argument("--nodes", default="data/cora/nodes", help="the node table, for GraphInfer")
    parser.add_argument("--edges", default="data/cora/edges", help="the edge table, for GraphInfer")
    args = parser.parse_args()

    model, scores = train(graphflat.open_records(args.records), args.epochs, args.seed)
    print("PyTorch on the records: " + ", ".join(f"{split} accuracy {a:.3f}" for split, a in scores.items()))
    run = save_model(model, args.output, records=args.records, overwrite=args.overwrite)
    print(f"committed {args.output} (run {run})")
    if args.graphflat:
        through = graphinfer_accuracy(args.graphflat, args.nodes, args.edges, args.output)
        print(f"GraphInfer on the graph: test accuracy {through:.3f}")


if __name__ == "__main__":
    main()
