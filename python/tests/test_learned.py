"""Learned embedding tables in PyTorch (:class:`graphflat.pyg.LearnedRows`): rows found by id or
by string, zeros for a node without one, the table written back as GraphTrainer writes it; and a
model GraphTrainer trained with learned rows on a graph keyed by strings gives GraphInfer's
embeddings for every endpoint of every record, to 1e-4. (Every model kind with learned rows,
both ways, is in ``test_models.py``.)"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from conftest import run_job

from graphflat import ChangedError, open_records, read_table
from graphflat.pyg import SAGE, LearnedRows, load_model, save_model


def _table(types: list[str] | None, ids: list, rows: np.ndarray) -> pa.Table:
    item = pa.field("item", pa.float32(), nullable=False)
    values = pa.array(rows.reshape(-1), pa.float32())
    columns = {"node_id": pa.array(ids), "embedding": pa.FixedSizeListArray.from_arrays(values, type=pa.list_(item, 2))}
    return pa.table(({"node_type": pa.array(types)} if types else {}) | columns)


def test_rows_are_found_by_string_and_type_and_a_missing_row_is_zeros() -> None:
    rows = np.arange(8, dtype=np.float32).reshape(4, 2)
    table = _table(["user", "item", "user", "item"], ["b", "a", "a", "c"], rows)
    learned = LearnedRows.from_table(table, 2)
    got = learned.rows(["a", "b", "zzz"], "user").detach().numpy()
    np.testing.assert_array_equal(got, [rows[2], rows[0], [0, 0]])
    # The same string is another node in another type; a type without rows reads zeros.
    np.testing.assert_array_equal(learned.rows(["a"], "item").detach().numpy(), [rows[1]])
    np.testing.assert_array_equal(learned.rows(["a"], "shop").detach().numpy(), [[0, 0]])
    # Written back: the same rows, each type's sorted by id.
    back = learned.to_table().to_pylist()
    want = sorted(table.to_pylist(), key=lambda r: (r["node_type"] != "user", r["node_id"]))
    assert sorted(back, key=lambda r: (r["node_type"], r["node_id"])) == sorted(
        want, key=lambda r: (r["node_type"], r["node_id"])
    )


def test_integer_rows_take_gradients_only_where_found() -> None:
    learned = LearnedRows.from_table(_table(None, [7, 3], np.ones((2, 2), np.float32)), 2)
    out = learned.rows(torch.tensor([3, 5, 3]))
    out.sum().backward()
    grad = learned.embeddings["node"].weight.grad
    np.testing.assert_array_equal(grad.numpy(), [[0, 0], [2, 2]])


def test_a_learned_model_on_string_ids_gives_graphinfers_embeddings(string_records: Path, tmp_path: Path) -> None:
    tmp = string_records.parent
    model, out = tmp_path / "model", tmp_path / "embeddings"
    train = f'[train]\nrecords = "{string_records}"\noutput = "{model}"\nmodel = "sage"\nhidden = 8\n'
    train += "embedding_dim = 8\nlearned_embedding_dim = 6\nepochs = 2\nbatch_size = 64\n"
    infer = f'[infer]\nnodes = "{tmp}/nodes"\nedges = "{tmp}/edges"\nmodel = "{model}"\noutput = "{out}"\n'
    run_job(tmp_path, "learned-strings", train + infer)
    table = read_table(str(out))
    rows = dict(zip(table["node_id"].to_pylist(), np.stack(table["embedding"].to_numpy(zero_copy_only=False))))
    loaded = load_model(str(model))
    assert all(isinstance(k, str) for k in loaded.learned.ids[None].to_pylist())
    compared = 0
    for batch in open_records(str(string_records)).batches(split=None, batch_size=128, shuffle=False):
        data = batch.to_pyg()
        with torch.no_grad():
            ours = loaded(data).numpy()
        ends = torch.cat([data.src_index[:, None], data.dst_index[:, None], data.neg_index], 1)
        theirs = np.stack([[rows[data.node_key[i]] for i in row] for row in ends.tolist()])
        np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
        compared += len(ours)
    assert compared == len(open_records(str(string_records)))


def test_a_model_without_rows_replacing_one_with_rows_leaves_no_table(node_records: Path, tmp_path: Path) -> None:
    source = open_records(str(node_records))
    learned = LearnedRows.of_records(source, 4, seed=1)
    model, folder = tmp_path / "model", tmp_path / "model" / "embeddings"
    save_model(SAGE(source.meta, 8, 8, learned=learned).eval(), str(model), records=str(node_records))
    assert read_table(str(folder)).num_rows == len(learned.ids[None]) > 0
    # The table a save writes, as data teams read it.
    frame = pd.read_parquet(folder)
    assert len(frame) == len(learned.ids[None]) and frame.node_id.is_unique
    assert pq.read_table(folder).num_rows == duckdb.sql(f"select count(*) from '{folder}/*.parquet'").fetchall()[0][0]
    # Saved over by a model without rows: its table goes, folder and all.
    save_model(SAGE(source.meta, 8, 8).eval(), str(model), records=str(node_records), overwrite=True)
    assert not folder.exists()
    # GraphTrainer's commit does the same to a table saved here.
    save_model(SAGE(source.meta, 8, 8, learned=learned).eval(), str(model), records=str(node_records), overwrite=True)
    assert folder.exists()
    keys = 'model = "sage"\nhidden = 8\nepochs = 1\noverwrite = true\n'
    run_job(tmp_path, "plain", f'[train]\nrecords = "{node_records}"\noutput = "{model}"\n{keys}')
    assert not folder.exists() and load_model(str(model)).learned is None


def test_rows_graphinfer_would_refuse_are_refused_when_built() -> None:
    rows = np.zeros((2, 2), np.float32)
    for ids, words in [
        (pa.array(["a", None]), "a null id"),
        (pa.array(["a", ""]), "an empty string id"),
        (pa.array([3, 3]), "an id twice"),
        (pa.array([1.5, 2.5]), "integers or strings"),
    ]:
        with pytest.raises(ValueError, match=words):
            LearnedRows({"user": (ids, torch.from_numpy(rows))}, 2)
    with pytest.raises(ValueError, match="NaN or infinite"):
        LearnedRows({None: (pa.array([1, 2]), torch.tensor([[0.0, float("nan")], [0, 0]]))}, 2)
    # Any string encoding reads as one: utf8_view and a dictionary (pandas' category).
    view = LearnedRows.from_table(
        _table(None, ["x", "y"], rows + 1).cast(
            pa.schema(
                [
                    pa.field("node_id", pa.string_view()),
                    pa.field("embedding", pa.list_(pa.field("item", pa.float32(), False), 2)),
                ]
            )
        ),
        2,
    )
    np.testing.assert_array_equal(view.rows(["y"]).detach().numpy(), [[1, 1]])
    category = LearnedRows({None: (pa.array(["x", "y"]).dictionary_encode(), torch.ones(2, 2))}, 2)
    assert category.keyed_by_strings


def test_rows_that_do_not_fit_the_model_are_refused_before_a_save() -> None:
    learned = LearnedRows({"user": (pa.array(["a"]), torch.zeros(1, 2))}, 2)
    learned.check(2, ["user"], strings=True)
    for args, words in [
        ((3, ["user"], True), "2 wide for a model of learned rows 3"),
        ((2, ["item"], True), "node types the model gives no rows"),
        ((2, None, True), "for a homogeneous model"),
        ((2, ["user"], False), "keyed by strings for a graph keyed by integers"),
    ]:
        with pytest.raises(ValueError, match=words):
            learned.check(*args)
    mixed = LearnedRows({"user": (pa.array(["a"]), torch.zeros(1, 2)), "item": (pa.array([1]), torch.zeros(1, 2))}, 2)
    with pytest.raises(ValueError, match="by integers in one type and by strings in another"):
        mixed.check(2, ["user", "item"], strings=True)
    with pytest.raises(ValueError, match="without a node type"):
        LearnedRows({None: (pa.array([1]), torch.zeros(1, 2))}, 2).check(2, ["user"], strings=False)


def test_unknown_types_empty_tables_foreign_files_and_fifos(node_records: Path, tmp_path: Path) -> None:
    source = open_records(str(node_records))
    with pytest.raises(ValueError, match="no node types of the records"):
        LearnedRows.of_records(source, 4, types=["user"])
    # A model of no rows saves no table part, and loads with an empty one (every row zeros).
    model = tmp_path / "model"
    save_model(SAGE(source.meta, 8, 8, learned=LearnedRows({}, 4)).eval(), str(model), records=str(node_records))
    assert load_model(str(model)).learned.rows(torch.tensor([1, 2])).abs().sum() == 0
    # A file no manifest lists in the table's folder: not this commit's to overwrite or remove.
    learned = LearnedRows.of_records(source, 4)
    save_model(SAGE(source.meta, 8, 8, learned=learned).eval(), str(model), records=str(node_records), overwrite=True)
    (model / "embeddings" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt: not a part this project wrote"):
        save_model(SAGE(source.meta, 8, 8).eval(), str(model), records=str(node_records), overwrite=True)
    (model / "embeddings" / "notes.txt").unlink()
    # A FIFO in a part's place is refused at once, not read.
    part = next((model / "embeddings").glob("*.parquet"))
    part.unlink()
    os.mkfifo(part)
    with pytest.raises(ChangedError, match="not a regular file"):
        read_table(str(model / "embeddings"))
