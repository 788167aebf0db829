//! Reading delta tables (`delta_nodes`, `delta_edges`; the contract is `schemas/README.md`'s
//! "Delta tables"): which kept rows a delta replaces, checked row by row.
//!
//! A delta names rows by their key, a node by `node_id`, an edge by `(src, dst)`, and says of
//! each `op = "upsert"` (the row as it is now) or `op = "delete"`. Every kept row whose key the
//! delta names goes; the delta's `upsert` rows come in. So a key's rows after a delta are the
//! delta's upserts of it, whatever the kept graph held, and applying a delta twice gives what
//! applying it once gives (a retried run is safe). A node the delta names with no upsert is
//! deleted, and every kept edge into or out of it goes with it.
//!
//! The keys are held in memory, 16 bytes a node and 32 an edge: a delta is a day's changes.
//! A string id is held as its two hashes (`schemas::ids::StringHash`, 118 bits), as the map
//! step tells strings apart.

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use schemas::columns::plain;
use schemas::ids::{IdColumn, IdKind, StringHash};
use schemas::{BadInput, Location};
use tables::{Error, Io, ParquetFile};

/// The column that says what a delta row does.
pub const OP: &str = "op";

/// A key as the delta and the kept table compare it: an integer id, or a string's hashes.
pub type Key = u128;

/// What a delta row does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Upsert,
    Delete,
}

/// The keys a delta names, read from its tables.
#[derive(Debug, Default)]
pub struct Changes {
    /// Every node the node delta names: its kept row goes.
    pub nodes: HashSet<Key>,
    /// The nodes it names with no upsert: their kept edges go too.
    pub deleted: HashSet<Key>,
    /// Every `(src, dst)` the edge delta names: its kept edges go.
    pub edges: HashSet<(Key, Key)>,
    /// Rows of each delta.
    pub node_rows: u64,
    pub edge_rows: u64,
}

impl Changes {
    /// Reads the node delta's files, then the edge delta's (in the order their tables list
    /// them), whose ids must be of `kind`, the kept tables'.
    pub fn read(io: &Io, nodes: &[ParquetFile], edges: &[ParquetFile], kind: IdKind) -> Result<Changes, Error> {
        let mut changes = Changes::default();
        let mut upserted = HashSet::new();
        for file in nodes {
            each_row_group(io, file, &["node_id", OP], |batch, name, first| {
                let ids = ids_of(batch, "node_id", name, first, kind)?;
                for (i, op) in ops(batch, name, first)?.into_iter().enumerate() {
                    let key = key(&ids, i);
                    changes.nodes.insert(key);
                    if op == Op::Upsert && !upserted.insert(key) {
                        let at = Location::file(name).row(first + i as u64).column("node_id");
                        return Err(BadInput::new(at, "a second upsert of this node in one delta").into());
                    }
                }
                changes.node_rows += batch.num_rows() as u64;
                Ok(())
            })?;
        }
        changes.deleted = changes.nodes.difference(&upserted).copied().collect();
        for file in edges {
            each_row_group(io, file, &["src", "dst", OP], |batch, name, first| {
                let (src, dst) = (ids_of(batch, "src", name, first, kind)?, ids_of(batch, "dst", name, first, kind)?);
                for (i, op) in ops(batch, name, first)?.into_iter().enumerate() {
                    let (s, d) = (key(&src, i), key(&dst, i));
                    let gone = [("src", s), ("dst", d)].into_iter().find(|(_, k)| changes.deleted.contains(k));
                    if let (Op::Upsert, Some((column, _))) = (op, gone) {
                        let at = Location::file(name).row(first + i as u64).column(column);
                        return Err(BadInput::new(at, "an upsert of an edge of a node this delta deletes").into());
                    }
                    changes.edges.insert((s, d));
                }
                changes.edge_rows += batch.num_rows() as u64;
                Ok(())
            })?;
        }
        Ok(changes)
    }

    /// Whether a kept node's row goes.
    pub fn drops_node(&self, node: Key) -> bool {
        self.nodes.contains(&node)
    }

    /// Whether a kept edge goes: the delta names it, or deletes an end of it.
    pub fn drops_edge(&self, src: Key, dst: Key) -> bool {
        self.edges.contains(&(src, dst)) || self.deleted.contains(&src) || self.deleted.contains(&dst)
    }
}

/// `each` over every row group of `file`, reading `columns` (with the file's name and the
/// group's first row).
fn each_row_group(
    io: &Io,
    file: &ParquetFile,
    columns: &[&str],
    mut each: impl FnMut(&RecordBatch, &str, u64) -> Result<(), Error>,
) -> Result<(), Error> {
    let name = file.name();
    let schema = file.arrow.schema();
    if let Some(missing) = columns.iter().find(|c| schema.field_with_name(c).is_err()) {
        let at = Location::file(&name).column(*missing);
        return Err(BadInput::new(at, "missing required column of a delta table").into());
    }
    for rg in 0..file.row_groups() {
        file.read_columns(io, rg, Some(columns), |batch, first| each(&batch, &name, first))?;
    }
    Ok(())
}

/// Column `column` of `batch` as ids of `kind`, checked (no null, no empty string).
pub fn ids_of(batch: &RecordBatch, column: &str, file: &str, first: u64, kind: IdKind) -> Result<IdColumn, Error> {
    let ids = IdColumn::read(batch, column, file, first)?;
    if ids.kind() != kind {
        let at = Location::file(file).column(column);
        let problem = format!("{} where the kept graph's ids are {}", ids.kind().name(), kind.name());
        return Err(BadInput::new(at, problem).into());
    }
    Ok(ids)
}

/// Row `i`'s id as a [`Key`].
pub fn key(ids: &IdColumn, i: usize) -> Key {
    match ids {
        IdColumn::Ints(ints) => ints.value(i) as u64 as Key,
        IdColumn::Strings(strings) => {
            let h = StringHash::of(strings.value(i));
            (Key::from(h.g) << 64) | Key::from(h.h as u64)
        }
    }
}

/// The `op` of every row of `batch`: `upsert` or `delete`, else bad input at its row.
pub(super) fn ops(batch: &RecordBatch, file: &str, first: u64) -> Result<Vec<Op>, Error> {
    let column = plain(batch.column_by_name(OP).expect("read with the column"));
    let at = |row: Option<usize>| {
        let at = Location::file(file).column(OP);
        row.map_or(at.clone(), |i| at.row(first + i as u64))
    };
    let values: Vec<Option<&str>> = match column.data_type() {
        DataType::Utf8 => column.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => column.as_string::<i64>().iter().collect(),
        DataType::Utf8View => column.as_string_view().iter().collect(),
        other => return Err(BadInput::new(at(None), format!("expected strings, found {other}")).into()),
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| match value {
            Some("upsert") => Ok(Op::Upsert),
            Some("delete") => Ok(Op::Delete),
            Some(other) => {
                let found = schemas::ids::shown(other);
                Err(BadInput::new(at(Some(i)), format!("expected \"upsert\" or \"delete\", found {found}")).into())
            }
            None => Err(BadInput::new(at(Some(i)), "null: every delta row says upsert or delete").into()),
        })
        .collect()
}
