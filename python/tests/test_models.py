"""Models across languages: a model GraphTrainer trained, loaded into PyTorch, gives GraphInfer's
outputs on every record; a model trained in PyTorch and saved gives, through GraphInfer, what
PyTorch computes for it. Every kind, node and link records, homogeneous and typed, edge
features on and off, and GCN and SAGE over their precomputed features (a dense first layer);
to 1e-4.

GraphInfer computes each node over the whole graph (no records), sampling each node's in-edges
as the records did: its node outputs (``embedding = k``: the last layer's, the logits) and pair
scores are the independent side of each comparison.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from conftest import run_job

from graphflat import open_records, read_table
from graphflat.pyg import LearnedRows, load_model, save_model
from graphflat.pyg import models as kinds

TOLERANCE = 1e-4
WIDTH = 8

# (kind, [train] keys) of each model compared.
PLAIN = [
    ("gcn", {}),
    ("gcn", {"normalize_features": True}),
    ("sage", {"edge_features": False}),
    ("sage", {}),
    ("gat", {"edge_features": False}),
    ("gat", {"normalize_edge_features": True}),
    ("gine", {"edge_features": False}),
    ("gine", {"normalize_edge_features": True}),
    ("sage", {"learned_embedding_dim": 6}),
]
LINK = [
    ("gcn", {"decoder": "dot"}),
    ("sage", {"decoder": "mlp"}),
    ("gat", {}),
    ("gine", {"decoder": "mlp"}),
    ("gcn", {"learned_embedding_dim": 6}),
]
# Records over [precompute]'s Â X: a GCN with a dense first layer; over [X | mean X], a SAGE.
PRECOMPUTED = [("gcn", {})]
PRECOMPUTED_SAGE = [("sage", {})]
PRECOMPUTED_LINK = [("gcn", {"decoder": "mlp"})]
TYPED = [
    ("rgcn", {}),
    ("rgcn", {"bases": 2, "normalize_edge_features": True}),
    ("sage", {"edge_features": False}),
    ("sage", {"normalize_edge_features": True}),
    ("rgcn", {"learned_embedding_dim": 6, "learned_embedding_types": ["user", "shop"]}),
]
TYPED_LINK = [
    ("rgcn", {"decoder": "mlp"}),
    ("sage", {"edge_features": False}),
    ("sage", {"learned_embedding_dim": 6, "learned_embedding_types": ["item"]}),
]


def _id(case) -> str:
    kind, keys = case
    return "-".join([kind, *(f"{k}={v}" for k, v in keys.items())])


def _toml(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else f'"{value}"' if isinstance(value, str) else str(value)


def rust_model(records: Path, out: Path, kind: str, keys: dict) -> Path:
    """A ``kind`` model GraphTrainer trains on ``records`` for two epochs."""
    link = open_records(str(records)).meta.task == "link"
    width = "embedding_dim" if link else "classes"
    lines = [f'records = "{records}"', f'output = "{out}"', f'model = "{kind}"', "epochs = 2", f"hidden = {WIDTH}"]
    lines += [f"{width} = {WIDTH}", "heads = 2", "batch_size = 64"]
    lines += [f"{k} = {_toml(v)}" for k, v in keys.items()]
    run_job(out.parent, f"train-{out.name}", "[train]\n" + "\n".join(lines) + "\n")
    return out


def python_model(records: Path, out: Path, kind: str, keys: dict) -> Path:
    """A ``kind`` model trained in PyTorch on ``records`` for a few steps, then saved."""
    torch.manual_seed(3)
    source = open_records(str(records))
    link = source.meta.task == "link"
    keys = dict(keys)
    dim, types = keys.pop("learned_embedding_dim", 0), keys.pop("learned_embedding_types", ())
    learned = LearnedRows.of_records(source, dim, types=types, seed=4) if dim else None
    model = getattr(kinds, kind.upper())(source.meta, WIDTH, WIDTH, heads=2, dropout=0.3, learned=learned, **keys)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for batch in itertools.islice(source.batches("train", batch_size=64, seed=1), 6):
        data = batch.to_pyg()
        if link:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model.pair_scores(data), data.edge_label)
        else:
            labeled = data.y >= 0
            loss = torch.nn.functional.cross_entropy(model(data)[labeled], data.y[labeled])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_model(model.eval(), str(out), records=str(records))
    return out


def infer(records: Path, model: Path, out: Path, *, pairs: Path | None = None) -> None:
    """GraphInfer over the graph ``records`` were flattened from (the fixtures' layout)."""
    meta = open_records(str(records)).meta
    tmp = records.parent
    if meta.typed:
        graph, keys = (tmp / "graph.toml").read_text(), f'target_type = "{meta.target_type}"\n'
    else:
        edges = tmp / ("split" if meta.task == "link" else "g/edges")
        nodes = tmp / ("ax" if meta.precomputed else "g/nodes")
        graph, keys = "", f'nodes = "{nodes}"\nedges = "{edges}"\n'
    if meta.task == "node":
        keys += f"embedding = {meta.hops + int(meta.precomputed)}\n"
    if pairs is not None:
        keys += f'pairs = "{pairs}"\npairs_output = "{out}-pairs"\n'
    run_job(out.parent, f"infer-{out.name}", f'{graph}[infer]\n{keys}model = "{model}"\noutput = "{out}"\n')


def embeddings(out: Path, node_type: str | None) -> dict[int, np.ndarray]:
    """GraphInfer's ``embedding`` of each node (of ``node_type`` in a typed output)."""
    table = read_table(str(out))
    if node_type is not None:
        table = table.filter(pa.compute.equal(table["node_type"], node_type))
    rows = np.stack(table["embedding"].to_numpy(zero_copy_only=False))
    return dict(zip(table["node_id"].to_numpy(), rows))


def by_id(rows: dict[int, np.ndarray], ids: torch.Tensor) -> np.ndarray:
    return np.stack([rows[i] for i in ids.reshape(-1).tolist()]).reshape(*ids.shape, -1)


def compare_nodes(records: Path, model_dir: Path, out: Path) -> None:
    model, source = load_model(str(model_dir)), open_records(str(records))
    infer(records, model_dir, out)
    rows = embeddings(out, source.meta.target_type)
    compared = 0
    for batch in source.batches(split=None, batch_size=128, shuffle=False):
        data = batch.to_pyg()
        with torch.no_grad():
            ours = model(data).numpy()
        np.testing.assert_allclose(ours, by_id(rows, data.root_id), atol=TOLERANCE, rtol=0)
        compared += len(ours)
    assert compared == len(source) and compared > 100


def compare_links(records: Path, model_dir: Path, out: Path) -> None:
    """Every endpoint's embedding and every record's pair scores against GraphInfer's."""
    model, source = load_model(str(model_dir)), open_records(str(records))
    meta = source.meta
    relation = next((r for r in meta.relations if r.name == meta.link_relation), None)
    batches = [b.to_pyg() for b in source.batches(split=None, batch_size=128, shuffle=False)]
    # Candidate pairs: every record's positive and negative pairs.
    src = torch.cat([torch.cat([d.link_src, d.link_src.repeat_interleave(d.negatives.shape[1])]) for d in batches])
    dst = torch.cat([torch.cat([d.link_dst, d.negatives.reshape(-1)]) for d in batches])
    pairs = out.parent / f"{out.name}-candidates"
    pairs.mkdir()
    pq.write_table(pa.table({"src": src.numpy(), "dst": dst.numpy()}), pairs / "part-0.parquet")
    infer(records, model_dir, out, pairs=pairs)
    sources = embeddings(out, relation.src if relation else None)
    targets = embeddings(out, relation.dst if relation else None)
    scored = read_table(f"{out}-pairs").to_pandas().groupby(["src", "dst"])["score"].first()
    for data in batches:
        with torch.no_grad():
            ours = model(data)
            scores = model.pair_scores(data, ours).numpy()
        np.testing.assert_allclose(ours[:, 0].numpy(), by_id(sources, data.link_src), atol=TOLERANCE, rtol=0)
        ends = torch.cat([data.link_dst[:, None], data.negatives], 1)
        np.testing.assert_allclose(ours[:, 1:].numpy(), by_id(targets, ends), atol=TOLERANCE, rtol=0)
        k = data.negatives.shape[1]
        pair_ids = zip(
            torch.cat([data.link_src, data.link_src.repeat_interleave(k)]).tolist(),
            torch.cat([data.link_dst, data.negatives.reshape(-1)]).tolist(),
        )
        theirs = np.array([scored[p] for p in pair_ids], np.float32)
        np.testing.assert_allclose(scores, theirs, atol=TOLERANCE, rtol=0)


def _model(direction: str, records: Path, tmp: Path, case) -> Path:
    kind, keys = case
    make = rust_model if direction == "rust" else python_model
    return make(records, tmp / "model", kind, keys)


DIRECTIONS = ["rust", "python"]
# (the fixture of the records, a case): every case of every record set.
CASES = [
    (fixture, case)
    for fixture, cases in [
        ("node_records", PLAIN),
        ("precomputed_records", PRECOMPUTED),
        ("precomputed_sage_records", PRECOMPUTED_SAGE),
        ("link_records", LINK),
        ("precomputed_link_records", PRECOMPUTED_LINK),
        ("typed_records", TYPED),
        ("typed_link_records", TYPED_LINK),
    ]
    for case in cases
]


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize(("fixture", "case"), CASES, ids=[f"{f}-{_id(c)}" for f, c in CASES])
def test_a_model_gives_graphinfers_outputs(direction: str, fixture: str, case, request, tmp_path: Path) -> None:
    records = request.getfixturevalue(fixture)
    model = _model(direction, records, tmp_path, case)
    if open_records(str(records)).meta.task == "link":
        compare_links(records, model, tmp_path / "embeddings")
    else:
        compare_nodes(records, model, tmp_path / "scores")


def test_a_saved_model_replaces_a_committed_one_only_when_asked(node_records: Path, tmp_path: Path) -> None:
    from graphflat.commit import CommittedError

    meta = open_records(str(node_records)).meta
    first = kinds.SAGE(meta, WIDTH, WIDTH)
    out = tmp_path / "model"
    run = save_model(first, str(out), records=str(node_records))
    with pytest.raises(CommittedError, match=run):
        save_model(kinds.GCN(meta, WIDTH, WIDTH), str(out), records=str(node_records))
    assert load_model(str(out)).spec["kind"] == "sage"
    second = save_model(kinds.GCN(meta, WIDTH, WIDTH), str(out), records=str(node_records), overwrite=True)
    assert load_model(str(out)).spec["kind"] == "gcn"
    # The replaced run's files are gone, and nothing is left staged.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["_SUCCESS", "_manifest.parquet", f"model-{second}.bpk", f"model-{second}.json"]
    )


def test_a_changed_weight_file_is_refused(node_records: Path, tmp_path: Path) -> None:
    from graphflat import ChangedError

    out = tmp_path / "model"
    run = save_model(kinds.GAT(open_records(str(node_records)).meta, WIDTH, WIDTH), str(out), records=str(node_records))
    weights = out / f"model-{run}.bpk"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ChangedError, match=run):
        load_model(str(out))


def test_each_precomputed_product_takes_the_model_it_was_computed_for(
    precomputed_records: Path, precomputed_sage_records: Path
) -> None:
    gcn, sage = open_records(str(precomputed_records)).meta, open_records(str(precomputed_sage_records)).meta
    assert (gcn.precomputed_for, sage.precomputed_for) == ("gcn", "sage")
    assert sage.feature_dim == 2 * gcn.feature_dim
    with pytest.raises(ValueError, match="this sage has precomputed = 1 and the records' features are gcn inputs"):
        kinds.SAGE(gcn, WIDTH, WIDTH)
    with pytest.raises(ValueError, match="this gcn has precomputed = 1 and the records' features are sage inputs"):
        kinds.GCN(sage, WIDTH, WIDTH)


def test_a_module_is_saved_only_with_records_it_reads(node_records: Path, link_records: Path, tmp_path: Path) -> None:
    from graphflat import NotCommittedError

    model = kinds.GCN(open_records(str(node_records)).meta, WIDTH, WIDTH)
    with pytest.raises(ValueError, match="node model for link records"):
        save_model(model, str(tmp_path / "model"), records=str(link_records))
    assert not (tmp_path / "model").exists()
    # overwrite replaces a model only: never the records (or any table) at the path.
    before = sorted(p.name for p in node_records.iterdir())
    with pytest.raises(FileExistsError, match=r"holds a record set \(written by \[flatten\]\)"):
        save_model(model, str(node_records), records=str(node_records), overwrite=True)
    assert sorted(p.name for p in node_records.iterdir()) == before
    assert len(open_records(str(node_records))) > 0
    with pytest.raises(NotCommittedError):
        load_model(str(tmp_path))


def test_of_two_saves_racing_for_one_directory_one_commits(node_records: Path, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from graphflat.commit import CommittedError

    meta = open_records(str(node_records)).meta
    out = tmp_path / "model"

    def save(kind: str) -> str | None:
        try:
            return save_model(getattr(kinds, kind)(meta, WIDTH, WIDTH), str(out), records=str(node_records))
        except CommittedError:
            return None

    for _ in range(5):
        shutil.rmtree(out, ignore_errors=True)
        with ThreadPoolExecutor(2) as pool:
            runs = [r for r in pool.map(save, ["GCN", "SAGE"]) if r]
        assert len(runs) == 1
        (run,) = [p.name[len("model-") : -len(".bpk")] for p in out.glob("model-*.bpk")]
        assert run in runs and load_model(str(out)) is not None
        assert not (out / "_temporary").exists()


def test_weights_that_do_not_fit_their_description_are_refused(node_records: Path, tmp_path: Path) -> None:
    meta = open_records(str(node_records)).meta
    out = tmp_path / "model"
    # A layer swapped for one of another width: the description (its spec) says otherwise.
    model = kinds.GCN(meta, WIDTH, WIDTH)
    reference = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    name = next(n for n, shape in reference.items() if len(shape) == 2)
    with torch.no_grad():
        holder, attribute = model, name.split(".")
        for part in attribute[:-1]:
            holder = getattr(holder, part)
        wider = torch.nn.Parameter(torch.zeros(reference[name][0] + 1, reference[name][1]))
        setattr(holder, attribute[-1], wider)
    with pytest.raises(ValueError, match=rf"tensor {name} has shape \[{reference[name][0] + 1}, "):
        save_model(model, str(out), records=str(node_records))
    assert not out.exists()
    # A module of the user's own: a clear error, not an AttributeError.
    with pytest.raises(TypeError, match="save_model saves this package's models"):
        save_model(torch.nn.Linear(2, 2), str(out), records=str(node_records))


def test_load_model_on_records_says_they_are_records(node_records: Path) -> None:
    with pytest.raises(ValueError, match=r"holds a record set \(written by \[flatten\]\).*not a model"):
        load_model(str(node_records))


def test_the_guard_refuses_in_graphflats_words(node_records: Path, tmp_path: Path) -> None:
    from graphflat.guard import CommittedError, guard

    with pytest.raises(CommittedError, match=r"lies inside .*which holds a record set"):
        guard(str(node_records / "inside"), "train", True)
    with pytest.raises(CommittedError, match=r"holds .*which is a record set"):
        guard(str(node_records.parent), "train", True)
    with pytest.raises(CommittedError, match=r"already holds a record set .*overwrite=True in Python"):
        guard(str(node_records), "flatten", False)
    guard(str(node_records), "flatten", True)
    guard(str(tmp_path / "new"), "train", False)
