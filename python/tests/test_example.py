"""The example ``examples/cora_gcn.py`` on Cora's records: PyTorch reaches the paper's accuracy
(at least 0.80 on the public test split), and GraphInfer running the saved model on the graph
itself predicts the test nodes exactly as PyTorch did on their records."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from conftest import BINARY, ROOT, graphflat, run_job, scratch

import graphflat as gf
from graphflat.pyg import save_model

CORA = ROOT.parent / "shared" / "data" / "cora"


def example():
    spec = importlib.util.spec_from_file_location("cora_gcn", ROOT / "python" / "examples" / "cora_gcn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_gcn_trained_in_pytorch_on_coras_records_runs_in_graphinfer(tmp_path_factory) -> None:
    if not CORA.exists():
        pytest.skip(f"no Cora at {CORA}")
    tmp = scratch(tmp_path_factory, "cora")
    graphflat("import", "ogb", str(CORA), "--out", str(tmp / "data"))
    job = (ROOT / "jobs" / "cora.toml").read_text().replace("data/cora", str(tmp / "data"))
    run_job(tmp, "cora", job)
    cora = example()
    model, accuracy = cora.train(gf.open_records(str(tmp / "data/flat")), epochs=200, seed=0)
    assert accuracy["test"] >= 0.80, accuracy
    save_model(model, str(tmp / "model"), records=str(tmp / "data/flat"))
    nodes, edges = str(tmp / "data/nodes"), str(tmp / "data/edges")
    through = cora.graphinfer_accuracy(str(BINARY), nodes, edges, str(tmp / "model"))
    # Equal counts of 1000 test nodes: a difference of one node would be 1e-3.
    assert through == pytest.approx(accuracy["test"], abs=1e-6)
