//! The map step: each worker reads its share of the node and edge tables (row groups, numbered
//! alike everywhere), checks every row, and sends nodes to their owners. Edges (and their
//! features, in one flat array) stay where they were read, in memory, until sampling routes
//! them; their endpoints are checked at the owners. The edge features' statistics are summed
//! per row group and added in (file, row group) order, so they are the same bits on any
//! number of workers.
//!
//! A node table keyed by strings (`schemas::ids`) is read once more first, its `node_id` column
//! only, to find the strings that share a 54-bit hash ([`id_kind`], `string_ids`); each node
//! then reaches its owner with its string, each edge endpoint is mapped where it is read, and
//! the owner checks the endpoint's fingerprint against its node's string.
//!
//! Only message-passing edges enter the graph: an edge whose `split` is `valid` or `test`
//! (`schemas::edges::passes_messages`) is checked like any other row, and its endpoints must be
//! known nodes, but it is not kept, not counted in any in-degree (so neither in GCN's
//! normalization nor in hub detection) and not summed into the edge feature statistics. Every
//! stage over the graph reads edges here, so none of them sees a held-out edge. Edges with a
//! split are also collected as supervision edges when the stage asks ([`EdgeRead`],
//! [`crate::supervision`]).

use std::cell::RefCell;
use std::rc::Rc;

use schemas::edge_stats::{EdgeStats, EdgeSums};
use schemas::edges::{self, EdgeBatch, passes_messages};
use schemas::ids::{IdColumn, IdKind, StringHash, StringIds, collided_at_owner, shown};
use schemas::nodes::{FEATURES, FloatLists, LABEL, Labels, NODE_ID, NodeBatch, Precomputed, SPLIT, check_features};
use schemas::{BadInput, Label, LabelKind, Location, Split, typed};
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use crate::graph::RelationEdges;
use crate::graph::{NodeStore, NodeStrings};
use crate::owner_map::{self, GraphKeys, PartitionTable};
pub use crate::same_kind::same_id_kind;
use crate::supervision::{self, SupervisionEdge, SupervisionSample};
use crate::{agree, open_agreed};
use cluster::IdTable;
use cluster::all_gather;
use cluster::hash::IdSet;
use cluster::shuffle;
use tables::{Io, ParquetFile, Place, units};

/// A row's place: file number (in the table's file order) and 0-based row in that file.
pub type RowAt = (u32, u64);

/// One row group's nodes bound for one owner: one message a (row group, owner) rather than one
/// a node, so that no node's features take an allocation of their own and the owner can
/// prefetch its index a few nodes ahead. Node `i`'s features are
/// `features[feature_at[i]..feature_at[i + 1]]` (rows of the wrong length travel as read, and
/// the owner reports them); its row is `(file, rows[i])`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OwnerBatch {
    owner: u64,
    file: u32,
    ids: Vec<i64>,
    labels: Vec<Option<Label>>,
    splits: Vec<Option<Split>>,
    feature_at: Vec<usize>,
    features: Vec<f32>,
    rows: Vec<u64>,
    /// A graph keyed by strings: node `i`'s string is `keys[key_at[i]..key_at[i + 1]]`.
    key_at: Vec<usize>,
    keys: String,
}

impl OwnerBatch {
    fn new(owner: u64, file: u32) -> Self {
        OwnerBatch {
            owner,
            file,
            ids: Vec::new(),
            labels: Vec::new(),
            splits: Vec::new(),
            feature_at: vec![0],
            features: Vec::new(),
            rows: Vec::new(),
            key_at: vec![0],
            keys: String::new(),
        }
    }

    fn push(&mut self, id: Key, label: Option<Label>, split: Option<Split>, features: &[f32], row: u64) {
        self.ids.push(id.0);
        self.labels.push(label);
        self.splits.push(split);
        self.features.extend_from_slice(features);
        self.feature_at.push(self.features.len());
        self.rows.push(row);
        if let Some(key) = id.1 {
            self.keys.push_str(key);
            self.key_at.push(self.keys.len());
        }
    }

    /// Node `i`'s original string, in a graph keyed by strings.
    fn key(&self, i: usize) -> Option<&str> {
        self.key_at.get(i + 1).map(|&end| &self.keys[self.key_at[i]..end])
    }
}

/// A node's internal id and, in a graph keyed by strings, its original string.
type Key<'a> = (i64, Option<&'a str>);

fn locate(files: &[ParquetFile], at: RowAt, column: &str) -> Location {
    Location::file(files[at.0 as usize].name()).row(at.1).column(column)
}

/// Reads the node table into each worker's [`NodeStore`]. Fails (on every worker alike) on a
/// missing or mistyped column, a null, NaN or infinite feature, a bad split, rows whose
/// feature lengths differ, a duplicate id or an empty table.
pub fn load_nodes(
    worker: &mut Worker,
    io: &Io,
    table: &Place,
    partition: Option<PartitionTable>,
) -> Result<NodeStore, Error> {
    let files = open_agreed(worker, io, table)?;
    agree(worker, same_optional_columns(&files, &[FEATURES, LABEL, SPLIT]))?;
    // The table's feature length is its first row's, and the targets' length (multi-label) its
    // first labeled row's: every worker reads those rows itself.
    let (dim, label_kind) = agree(worker, table_shape(io, &files))?;
    let mut store = NodeStore::new(dim, label_kind);
    store.precomputed = agree(worker, precomputed(table, &files))?;
    let kind = agree(worker, id_kind(&files, &[NODE_ID]))?;
    if kind == IdKind::String {
        store.strings = Some(NodeStrings::new(string_ids(worker, io, &files)?));
    }
    let strings = store.strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
    store.owners = owner_map::owners(worker, io, partition, GraphKeys { kind, strings: &strings, types: None })?;
    let store = Rc::new(RefCell::new(store));
    let read = read_node_table(worker, io, &files, &store, NodeTable { node_type: None, labels: true })?;
    if read == 0 {
        return Err(Error::BadData(format!("{}: the node table is empty", table.shown())));
    }
    let mut store = Rc::try_unwrap(store).map(RefCell::into_inner).unwrap_or_default();
    store.lay_out();
    Ok(store)
}

/// What the node table's precomputed features are (`[precompute]`'s output), if they are:
/// every part says the same in its schema metadata, or none says anything.
fn precomputed(table: &Place, files: &[ParquetFile]) -> Result<Option<Precomputed>, Error> {
    let says = |f: &ParquetFile| f.arrow.schema().metadata().get(schemas::nodes::PRECOMPUTED).cloned();
    let first = files.first().and_then(says);
    if let Some(other) = files.iter().find(|f| says(f) != first) {
        return Err(Error::BadData(format!(
            "{}: some parts of the node table hold precomputed features (written by [precompute]) and {} \
             does not say the same; write the table again with one [precompute] run",
            table.shown(),
            other.place.shown()
        )));
    }
    let Some(value) = first else { return Ok(None) };
    Precomputed::parse(&value).map(Some).ok_or_else(|| {
        Error::BadData(format!(
            "{}: {} = {value:?} in the node table's schema metadata; this graphflat knows only {:?} and {:?}",
            table.shown(),
            schemas::nodes::PRECOMPUTED,
            Precomputed::Gcn.value(),
            Precomputed::Sage.value()
        ))
    })
}

/// Reads a typed graph's node tables, one per type in type order, into one [`NodeStore`]
/// keyed by typed keys (`schemas::typed::pack`). Each table is checked as [`load_nodes`]
/// checks one, against its own first row's width; an id outside the typed range is bad input
/// too. Only the `target` type's labels and splits are kept (the records' roots), and with
/// `labeled` that type's table must have a `label` column. Errors name the type.
pub fn load_typed_nodes(
    worker: &mut Worker,
    io: &Io,
    tables: &[(String, Place)],
    target: u8,
    labeled: bool,
    partition: Option<PartitionTable>,
) -> Result<NodeStore, Error> {
    let mut shapes = Vec::with_capacity(tables.len());
    let mut opened = Vec::with_capacity(tables.len());
    let mut kinds = Vec::with_capacity(tables.len());
    for (t, (name, table)) in tables.iter().enumerate() {
        let named = |e| in_type(e, &format!("node type {name}"));
        let files = open_agreed(worker, io, table).map_err(named)?;
        agree(worker, same_optional_columns(&files, &[FEATURES, LABEL, SPLIT])).map_err(named)?;
        kinds.push(agree(worker, id_kind(&files, &[NODE_ID])).map_err(named)?);
        let unlabeled = !files.iter().all(|f| f.arrow.schema().column_with_name(LABEL).is_some());
        if labeled && t == usize::from(target) && unlabeled {
            return Err(Error::Usage(format!(
                "node type {name} is the target type, and its table {} has no label column",
                table.shown()
            )));
        }
        shapes.push(agree(worker, table_shape(io, &files)).map_err(named)?);
        opened.push(files);
    }
    let kind = one_id_kind(tables, &kinds)?;
    let widths = shapes.iter().map(|s| s.0).collect();
    let mut store = NodeStore::typed(widths, shapes[usize::from(target)].1);
    if kind == IdKind::String {
        // One table of collided strings for every type's: a string's key is its type and its
        // internal id, so strings of two types never meet, and numbering them together only
        // renumbers a pair that needed none (about 28 at a billion ids).
        store.strings = Some(NodeStrings::new(string_ids(worker, io, &opened.concat())?));
    }
    let strings = store.strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
    let names: Vec<String> = tables.iter().map(|(name, _)| name.clone()).collect();
    let keys = GraphKeys { kind, strings: &strings, types: Some(&names) };
    store.owners = owner_map::owners(worker, io, partition, keys)?;
    let store = Rc::new(RefCell::new(store));
    for (t, ((name, table), files)) in tables.iter().zip(&opened).enumerate() {
        let typed = NodeTable { node_type: Some(t as u8), labels: t == usize::from(target) };
        let read =
            read_node_table(worker, io, files, &store, typed).map_err(|e| in_type(e, &format!("node type {name}")))?;
        if read == 0 {
            return Err(Error::BadData(format!("node type {name}: {}: the node table is empty", table.shown())));
        }
    }
    let mut store = Rc::try_unwrap(store).map(RefCell::into_inner).unwrap_or_default();
    store.lay_out();
    Ok(store)
}

/// A typed graph's one id kind: every node type's table keyed alike (the outputs' `node_id`
/// is one column), or a usage error naming a type of each kind.
fn one_id_kind(tables: &[(String, Place)], kinds: &[IdKind]) -> Result<IdKind, Error> {
    let first = kinds.first().copied().unwrap_or(IdKind::Int);
    match kinds.iter().position(|&k| k != first) {
        None => Ok(first),
        Some(other) => Err(Error::Usage(format!(
            "node type {} is keyed by {} and node type {} by {}: a typed graph's node tables must all have \
             integer ids or all string ids (the outputs' node_id is one column)",
            tables[0].0,
            first.name(),
            tables[other].0,
            kinds[other].name()
        ))),
    }
}

/// Names the type or relation whose table an error is about (the file alone may not say).
pub fn in_type(error: Error, what: &str) -> Error {
    match error {
        Error::BadInput(b) => BadInput::new(b.at, format!("{what}: {}", b.problem)).into(),
        Error::BadData(s) => Error::BadData(format!("{what}: {s}")),
        Error::NoInput(s) => Error::NoInput(format!("{what}: {s}")),
        Error::Usage(s) => Error::Usage(format!("{what}: {s}")),
        other => other,
    }
}

/// How a node table is read: as a type of a typed graph (ids packed with it), and whether its
/// labels and splits are kept.
#[derive(Debug, Clone, Copy)]
struct NodeTable {
    node_type: Option<u8>,
    labels: bool,
}

/// Reads one node table into the owners' `store`; returns the nodes read over the cluster.
fn read_node_table(
    worker: &mut Worker,
    io: &Io,
    files: &[ParquetFile],
    store: &Rc<RefCell<NodeStore>>,
    how: NodeTable,
) -> Result<u64, Error> {
    let (index, peers) = (worker.index(), worker.peers());
    let before = store.borrow().len();
    let owner = Owner {
        store: store.clone(),
        rows: Rc::default(),
        problems: Rc::default(),
        names: Rc::new(files.iter().map(|f| f.name()).collect()),
        node_type: how.node_type,
        before,
    };
    let problems = owner.problems.clone();
    let strings = store.borrow().strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
    let owners = store.borrow().owners.clone();
    let read = shuffle(
        worker,
        |batch: &OwnerBatch| batch.owner,
        move |batch: OwnerBatch| owner.take(batch),
        |send| {
            for (f, rg) in units(files, index, peers) {
                let file = &files[f];
                let name = file.name();
                file.read_row_group(io, rg, |batch, first_row| {
                    let nodes = NodeBatch::from_batch(&batch, &name, first_row)?;
                    let mut batches: Vec<OwnerBatch> =
                        (0..peers as u64).map(|w| OwnerBatch::new(w, f as u32)).collect();
                    for i in 0..nodes.len() {
                        let row = first_row + i as u64;
                        let features = nodes.features(i, &name, row)?;
                        let id = node_key(how.node_type, nodes.ids.id(i, &strings), &name, row)?;
                        let label = nodes.label(i, &name, row)?;
                        let (label, split) = if how.labels { (label, nodes.split(i)) } else { (None, None) };
                        let to = owners.key(id) % peers as u64;
                        batches[to as usize].push((id, nodes.ids.key(i).as_str()), label, split, features, row);
                    }
                    send(batches.into_iter().filter(|b| !b.ids.is_empty()).collect());
                    Ok(())
                })?;
            }
            Ok(())
        },
    );
    agree(worker, read)?;
    let first_problem = problems.borrow().iter().min().cloned();
    agree(worker, first_problem.map_or(Ok(()), |p| Err(p.into())))?;
    Ok(cluster::sum(worker, (store.borrow().len() - before) as u64))
}

/// The owner's side of [`read_node_table`]: inserts the nodes it is sent into its store and
/// notes each bad row (a duplicate id, a feature length or label that differs from the
/// table's).
struct Owner {
    store: Rc<RefCell<NodeStore>>,
    /// Each node's row (of this table) by slot past `before`, to name both rows of a duplicate
    /// whatever the arrival order.
    rows: Rc<RefCell<Vec<RowAt>>>,
    /// Problems found here; the smallest location is reported.
    problems: Rc<RefCell<Vec<BadInput>>>,
    names: Rc<Vec<String>>,
    node_type: Option<u8>,
    before: usize,
}

impl Owner {
    fn take(&self, mut batch: OwnerBatch) {
        let (labels, splits) = (std::mem::take(&mut batch.labels), std::mem::take(&mut batch.splits));
        let mut store = self.store.borrow_mut();
        for (i, (label, split)) in labels.into_iter().zip(splits).enumerate() {
            // The index lookups are misses at millions of nodes: ask for them a few nodes ahead.
            if let Some(&ahead) = batch.ids.get(i + PREFETCH_ROWS) {
                store.prefetch(ahead);
            }
            let node = &batch.features[batch.feature_at[i]..batch.feature_at[i + 1]];
            let id = (batch.ids[i], batch.key(i));
            self.insert(&mut store, id, label, split, node, (batch.file, batch.rows[i]));
        }
    }

    fn insert(
        &self,
        store: &mut NodeStore,
        (id, key): Key,
        label: Option<Label>,
        split: Option<Split>,
        features: &[f32],
        at: RowAt,
    ) {
        let located =
            |at: RowAt, column: &str| Location::file(self.names[at.0 as usize].clone()).row(at.1).column(column);
        let mut problems = self.problems.borrow_mut();
        let width = store.width(self.node_type.unwrap_or(0));
        if features.len() != width {
            let problem =
                format!("feature length {} differs from the table's {width} (the first row's)", features.len());
            problems.push(BadInput::new(located(at, FEATURES), problem));
        }
        if let Some(problem) = label_problem(label.as_ref(), store.label_kind) {
            problems.push(BadInput::new(located(at, LABEL), problem));
        }
        let mut rows = self.rows.borrow_mut();
        let Err(slot) = store.insert(id, self.node_type.unwrap_or(0), label, split, features) else {
            rows.push(at);
            if let (Some(strings), Some(key)) = (store.strings.as_mut(), key) {
                strings.push(key);
            }
            return;
        };
        let slot = slot as usize - self.before;
        let (first, second) = (rows[slot].min(at), rows[slot].max(at));
        rows[slot] = first;
        let seen = if first.0 == second.0 {
            format!("row {}", first.1)
        } else {
            format!("{}, row {}", self.names[first.0 as usize], first.1)
        };
        let id = self.node_type.map_or(id, |_| typed::unpack(id).1);
        let problem = match (key, store.key(slot + self.before)) {
            (Some(key), Some(first)) if key != first => format!(
                "node_id {} and {} (at {seen}) agree in both 118 bits of their hashes, so edges could not tell them \
                 apart: rename one of them",
                shown(key),
                shown(first)
            ),
            (Some(key), _) => format!("duplicate node_id {} (first at {seen})", shown(key)),
            (None, _) => format!("duplicate node_id {id} (first at {seen})"),
        };
        problems.push(BadInput::new(located(second, NODE_ID), problem));
    }
}

/// A node's key: its id, packed with its type in a typed graph (an id outside the typed range
/// is bad input at its row).
fn node_key(node_type: Option<u8>, id: i64, file: &str, row: u64) -> Result<i64, BadInput> {
    let Some(t) = node_type else { return Ok(id) };
    typed::pack(t, id).ok_or_else(|| {
        BadInput::new(
            Location::file(file).row(row).column(NODE_ID),
            format!("node_id {id} is outside a typed graph's range [-2^55, 2^55)"),
        )
    })
}

/// The combiner's entry for `node`: its index in `ends` (added when first seen) and the
/// in-edges of it read so far.
fn end_entry<'a>(end_of: &'a mut IdTable<(u32, u32)>, ends: &mut Vec<i64>, node: i64) -> &'a mut (u32, u32) {
    let (entry, new) = end_of.get_or_insert_with(node, || (ends.len() as u32, 0));
    if new {
        ends.push(node);
    }
    entry
}

/// Rows ahead of the one being read whose endpoints the combiner prefetches: enough for their
/// misses to arrive while the rows between are read (see `cluster::prefetch`).
const PREFETCH_ROWS: usize = 8;

/// The first edge row of this worker's `units` (in file and row order) that names a node in
/// `unknown`: its row, the node and the column (`dst` before `src` in one row). The rows are
/// read again: the map step keeps neither held-out edges nor any edge's row, and only a failing
/// job looks.
fn first_unknown(
    io: &Io,
    files: &[ParquetFile],
    units: &[(usize, usize)],
    unknown: &IdSet<i64>,
    relation: Option<RelationRead>,
    strings: &StringIds,
) -> Result<Option<(RowAt, String, &'static str)>, Error> {
    for &(f, rg) in units {
        let name = files[f].name();
        let mut found = None;
        files[f].read_columns(io, rg, Some(&[edges::SRC, edges::DST]), |batch, first_row| {
            let batch = EdgeBatch::from_batch(&batch, &name, first_row, false)?;
            if found.is_none() {
                found = (0..batch.len()).find_map(|i| {
                    let (src, dst) = (batch.src.id(i, strings), batch.dst.id(i, strings));
                    // The ids were checked to be in range when first read.
                    let (src_key, dst_key) = relation.map_or(Ok((src, dst)), |r| r.keys(src, dst)).ok()?;
                    let named = if unknown.contains(&dst_key) {
                        Some((batch.dst.key(i), "dst"))
                    } else {
                        unknown.contains(&src_key).then_some((batch.src.key(i), "src"))
                    };
                    named.map(|(node, column)| ((f as u32, first_row + i as u64), node.to_string(), column))
                });
            }
            Ok(())
        })?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// Whether a table's id `columns` hold integers or strings: the first part's kind, which every
/// part must have.
pub fn id_kind(files: &[ParquetFile], columns: &[&str]) -> Result<IdKind, Error> {
    let mut first: Option<IdKind> = None;
    for file in files {
        for &column in columns {
            let Some((_, field)) = file.arrow.schema().column_with_name(column) else { continue };
            let at = || Location::file(file.name()).column(column);
            let Some(kind) = IdKind::of(field.data_type()) else {
                let problem = format!(
                    "expected ids: an integer (int64, int32, ...) or a string (utf8, large_utf8, utf8_view, or a \
                     dictionary of them), found {}",
                    field.data_type()
                );
                return Err(BadInput::new(at(), problem).into());
            };
            match first {
                Some(want) if want != kind => {
                    let problem =
                        format!("holds {}, where the table's first file's ids are {}", kind.name(), want.name());
                    return Err(BadInput::new(at(), problem).into());
                }
                _ => first = Some(kind),
            }
        }
    }
    Ok(first.unwrap_or(IdKind::Int))
}

/// The internal ids of a node table keyed by strings (`schemas::ids`): each worker reads the
/// `node_id` column of its share and sends each string's two hashes (16 bytes, not the string)
/// to the owner of its `h`, which finds the strings that share an `h`; those few are gathered on
/// every worker. A string seen twice is passed over here: the load that follows names both rows.
fn string_ids(worker: &mut Worker, io: &Io, files: &[ParquetFile]) -> Result<StringIds, Error> {
    let (index, peers) = (worker.index(), worker.peers());
    let seen: Rc<RefCell<Vec<StringHash>>> = Rc::default();
    let sink = seen.clone();
    let read = shuffle(
        worker,
        |batch: &(u64, Vec<StringHash>)| batch.0,
        move |batch: (u64, Vec<StringHash>)| sink.borrow_mut().extend(batch.1),
        |send| {
            for (f, rg) in units(files, index, peers) {
                let name = files[f].name();
                files[f].read_columns(io, rg, Some(&[NODE_ID]), |batch, first_row| {
                    let ids = IdColumn::read(&batch, NODE_ID, &name, first_row)?;
                    let mut to: Vec<Vec<StringHash>> = vec![Vec::new(); peers];
                    for hash in (0..ids.len()).filter_map(|i| ids.hash(i)) {
                        to[(cluster::hash::owner_key(hash.h) % peers as u64) as usize].push(hash);
                    }
                    send(to.into_iter().enumerate().map(|(w, hashes)| (w as u64, hashes)).collect());
                    Ok(())
                })?;
            }
            Ok(())
        },
    );
    agree(worker, read)?;
    let lost = collided_at_owner(seen.take());
    Ok(StringIds::from_collided(all_gather(worker, lost)))
}

/// Every part of a table has the optional `columns` (`label`, `split`, and an edge table's
/// `features`) of its first part, so that no part's values are silently taken as missing.
fn same_optional_columns(files: &[ParquetFile], columns: &[&str]) -> Result<(), Error> {
    let has = |file: &ParquetFile, column: &str| file.arrow.schema().column_with_name(column).is_some();
    let Some(first) = files.first() else { return Ok(()) };
    for file in &files[1..] {
        for &column in columns {
            if has(file, column) != has(first, column) {
                let (with, without) = if has(first, column) { (first, file) } else { (file, first) };
                let at = Location::file(without.name()).column(column);
                let problem = format!(
                    "this part has no {column:?} column, but {} has one: every part of a table needs the same columns",
                    with.name()
                );
                return Err(BadInput::new(at, problem).into());
            }
        }
    }
    Ok(())
}

/// A typed graph's relation table has no `split` column, but for a link job's relation: every
/// edge of another relation passes messages, and a split read as such would drop its `valid`
/// and `test` rows without a word.
fn no_split(files: &[ParquetFile]) -> Result<(), Error> {
    match files.first() {
        Some(file) if file.arrow.schema().column_with_name(edges::SPLIT).is_some() => {
            let at = Location::file(file.name()).column(edges::SPLIT);
            let problem = "a relation table of a typed graph has no split column unless its relation is the link \
                           job's link_relation, and this one is not: every edge passes messages (drop the column, or \
                           name this relation as link_relation)";
            Err(BadInput::new(at, problem).into())
        }
        _ => Ok(()),
    }
}

/// The feature length of the table's first row, and its label kind: class ids, or targets of
/// the length of the first labeled row (every worker reads the same rows).
fn table_shape(io: &Io, files: &[ParquetFile]) -> Result<(usize, LabelKind), Error> {
    let (mut dim, mut label) = (None, None);
    'files: for file in files {
        for rg in 0..file.row_groups() {
            let name = file.name();
            file.read_row_group(io, rg, |batch, first_row| {
                let nodes = NodeBatch::from_batch(&batch, &name, first_row)?;
                if dim.is_none() && !nodes.is_empty() {
                    let first = nodes.features(0, &name, first_row)?.len();
                    if first == 0 && nodes.features.is_some() {
                        let at = Location::file(name.as_str()).row(first_row).column(FEATURES);
                        return Err(BadInput::new(
                            at,
                            "an empty feature vector: give every node its features, or leave the features column \
                             out for nodes without features (their model input is then a learned embedding: [train] \
                             learned_embedding_dim, trained on records)",
                        )
                        .into());
                    }
                    dim = Some(first);
                }
                match &nodes.labels {
                    Some(Labels::Targets(_)) => {
                        for i in 0..nodes.len() {
                            if label.is_some() {
                                break;
                            }
                            if let Some(Label::Targets(t)) = nodes.label(i, &name, first_row + i as u64)? {
                                label = Some(LabelKind::Targets(t.len()));
                            }
                        }
                    }
                    _ => label = label.or(Some(LabelKind::Class)),
                }
                Ok(())
            })?;
            if dim.is_some() && label.is_some() {
                break 'files;
            }
        }
    }
    Ok((dim.unwrap_or(0), label.unwrap_or_default()))
}

/// The edge table's feature width: its first row's length (at least 1), or 0 when the table has
/// no `features` column. Every worker reads the same row (only that column of its row group).
fn edge_feature_dim(io: &Io, files: &[ParquetFile]) -> Result<usize, Error> {
    let has_features = |file: &ParquetFile| file.arrow.schema().column_with_name(edges::FEATURES).is_some();
    if !files.first().is_some_and(has_features) {
        return Ok(0);
    }
    for file in files {
        let name = file.name();
        for rg in 0..file.row_groups() {
            let mut dim = None;
            file.read_columns(io, rg, Some(&[edges::FEATURES]), |batch, first_row| {
                let features = FloatLists::from_column(&batch, edges::FEATURES, &name)?;
                if dim.is_none() && !features.is_empty() {
                    let first = check_features(&features, 0, &name, first_row)?.len();
                    if first == 0 {
                        let at = Location::file(name.as_str()).row(first_row).column(edges::FEATURES);
                        return Err(BadInput::new(
                            at,
                            "an empty feature vector: edge features need at least one value",
                        )
                        .into());
                    }
                    dim = Some(first);
                }
                Ok(())
            })?;
            if let Some(dim) = dim {
                return Ok(dim);
            }
        }
    }
    Ok(0)
}

/// One row group's edge feature sums, numbered by (file, row group): gathered from every worker
/// in that order, which every cluster numbers alike. Units are distinct, so the order is by
/// unit alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct UnitSums {
    unit: (u32, u32),
    sums: EdgeSums,
}

impl Ord for UnitSums {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.unit.cmp(&other.unit)
    }
}

impl PartialOrd for UnitSums {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for UnitSums {
    fn eq(&self, other: &Self) -> bool {
        self.unit == other.unit
    }
}

impl Eq for UnitSums {}

/// The whole edge table's feature statistics from every worker's per-unit sums, added in unit
/// order (`None` when `dim` is 0).
fn edge_stats(worker: &mut Worker, dim: usize, units: Vec<UnitSums>) -> Option<EdgeStats> {
    if dim == 0 {
        return None;
    }
    let mut total = EdgeSums::new(dim);
    all_gather(worker, units).iter().for_each(|u| total.merge(&u.sums));
    Some(total.stats())
}

/// What is wrong with a row's label given the table's kind, if anything.
fn label_problem(label: Option<&Label>, kind: LabelKind) -> Option<String> {
    match (label?, kind) {
        (Label::Class(_), LabelKind::Class) => None,
        (Label::Targets(t), LabelKind::Targets(n)) if t.len() == n => None,
        (Label::Targets(t), LabelKind::Targets(n)) => {
            Some(format!("{} targets, but the table's first labeled row has {n}", t.len()))
        }
        (Label::Targets(_), LabelKind::Class) | (Label::Class(_), LabelKind::Targets(_)) => {
            Some("the label type differs from the table's first file's".into())
        }
    }
}

/// One message-passing edge as read, kept by the worker that read it until sampling. Its
/// endpoints are their indices in [`ReadEdges::ends`], not their ids, and its relation, which
/// only a typed graph has, lies beside it ([`ReadEdges::relations`]): 12 bytes an edge instead
/// of 32, and the read edges are the map step's largest array (480 MB at 40M edges; ids and a
/// relation byte in the struct would take 1.28 GB, the relation byte alone 160 MB of padding).
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// The source's index in [`ReadEdges::ends`].
    pub src: u32,
    /// The destination's index in [`ReadEdges::ends`].
    pub dst: u32,
    pub weight: f32,
}

/// How the map step reads the edge table.
#[derive(Debug, Clone, Copy, Default)]
pub struct EdgeRead {
    /// Whether every weight must be > 0 (the weighted sampler's condition).
    pub require_positive_weight: bool,
    /// The supervision edges to collect into [`ReadEdges::supervision`] (`None`: none).
    pub supervision: Option<SupervisionSample>,
    /// A typed graph's relation table (`None`: the homogeneous edge table).
    pub relation: Option<RelationRead>,
}

/// How a typed graph's relation table is read: `src` ids are nodes of `src_type`, `dst` ids
/// of `dst_type`; each row is a `forward` edge and, reversed, a `reverse` edge when asked.
#[derive(Debug, Clone, Copy)]
pub struct RelationRead {
    pub forward: u8,
    pub reverse: Option<u8>,
    pub src_type: u8,
    pub dst_type: u8,
    /// The link relation of a link job or model: its table may have a `split`, whose `valid`
    /// and `test` edges are held out of the graph as in a homogeneous edge table.
    pub split: bool,
}

impl RelationRead {
    /// A row's (src, dst) as typed keys, or the column whose id is outside the typed range.
    fn keys(&self, src: i64, dst: i64) -> Result<(i64, i64), (&'static str, i64)> {
        let src = typed::pack(self.src_type, src).ok_or((edges::SRC, src))?;
        let dst = typed::pack(self.dst_type, dst).ok_or((edges::DST, dst))?;
        Ok((src, dst))
    }
}

/// The message-passing edges a worker read, and every distinct endpoint among them resolved at
/// its owner once. The map step visits each endpoint anyway (to check it and count in-degrees),
/// so the owner answers with the node's slot, and sampling routes an edge by its destination's
/// slot: the owner places it without a lookup of its own.
#[derive(Debug, Default)]
pub struct ReadEdges {
    /// The message-passing edges (split `train` or null) this worker read.
    pub edges: Vec<Edge>,
    /// A typed graph: each edge's relation, aligned with `edges`. Empty for a homogeneous
    /// graph, whose every edge is of relation 0.
    pub relations: Vec<u8>,
    /// The edge table's feature width (0: it has none).
    pub edge_dim: usize,
    /// `edge_dim` features per edge, aligned with `edges` (one flat array, 4 bytes a value).
    pub features: Vec<f32>,
    /// The message-passing edges' feature statistics over the whole table, the same on every
    /// worker (`None` without features, or for a typed graph: see `relation_edges`).
    pub edge_stats: Option<EdgeStats>,
    /// A typed graph: each relation's edge feature width and statistics.
    pub relation_edges: RelationEdges,
    /// Each distinct endpoint's id, in first-read order (held-out edges' endpoints included);
    /// [`Edge`]s name their endpoints by their index here.
    pub ends: Vec<i64>,
    /// Each endpoint's slot at its owner.
    pub slots: Vec<u32>,
    /// The supervision edges whose source this worker owns, sorted by (src, dst, split); empty
    /// unless [`EdgeRead::supervision`] asked for them.
    pub supervision: Vec<SupervisionEdge>,
}

impl ReadEdges {
    /// A typed graph's relation tables, read one by one (`relations` relations in all,
    /// reversed ones included), as one read: each edge's features padded to the widest table's
    /// width, and each relation's width and statistics kept (see [`RelationEdges`]). Only a
    /// link relation's table holds supervision edges.
    pub fn typed(tables: Vec<(RelationRead, ReadEdges)>, relations: usize) -> ReadEdges {
        let width = tables.iter().map(|(_, t)| t.edge_dim).max().unwrap_or(0);
        let mut all = ReadEdges { edge_dim: width, ..ReadEdges::default() };
        all.relation_edges = RelationEdges { dims: vec![0; relations], stats: vec![None; relations] };
        for (read, table) in tables {
            for r in std::iter::once(read.forward).chain(read.reverse) {
                all.relation_edges.dims[usize::from(r)] = table.edge_dim;
                all.relation_edges.stats[usize::from(r)] = table.edge_stats.clone();
            }
            all.supervision.extend(table.supervision);
            let shift = all.ends.len() as u32;
            all.edges.extend(table.edges.iter().map(|e| Edge { src: e.src + shift, dst: e.dst + shift, ..*e }));
            all.relations.extend(&table.relations);
            all.ends.extend(table.ends);
            all.slots.extend(table.slots);
            if width > 0 {
                let dim = table.edge_dim;
                all.features.reserve(table.edges.len() * width);
                for i in 0..table.edges.len() {
                    all.features.extend_from_slice(&table.features[i * dim..(i + 1) * dim]);
                    all.features.resize(all.features.len() + width - dim, 0.0);
                }
            }
        }
        all
    }

    pub fn len(&self) -> usize {
        self.edges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }
}

/// Edge `i`'s relation in a [`ReadEdges::relations`] array: 0 where the array is empty (a
/// homogeneous graph).
pub(crate) fn relation_of(relations: &[u8], i: usize) -> u8 {
    relations.get(i).copied().unwrap_or(0)
}

/// What an owner checks about its node: that it exists (in a graph keyed by strings, that its
/// string's fingerprint, `StringHash::g`, is `print`); and how many in-edges it has (0 for a
/// node this worker read only as a source or on held-out edges). `end` is its index at the
/// `reader`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Endpoint {
    node: i64,
    in_edges: u64,
    reader: u32,
    end: u32,
    print: u64,
}

/// A reader's fingerprints of the strings its endpoints were read as (`StringHash::g`, aligned
/// with `ends`; empty for integer ids), and the first row whose string differs from the one its
/// internal id was first read with: two strings with one id cannot both be nodes (node strings
/// never share one), so such a row names an unknown node unless the first string was the
/// unknown one, which the owner's check then finds.
#[derive(Debug, Default)]
struct Prints {
    prints: Vec<u64>,
    conflict: Option<(RowAt, String, &'static str)>,
}

impl Prints {
    /// Notes endpoint `end`'s fingerprint `print` (`None`: an integer id), read at `at`.
    fn see(&mut self, end: u32, print: Option<u64>, at: impl FnOnce() -> (RowAt, String, &'static str)) {
        let Some(print) = print else { return };
        match self.prints.get(end as usize) {
            None => self.prints.push(print),
            Some(&g) if g != print && self.conflict.is_none() => self.conflict = Some(at()),
            Some(_) => {}
        }
    }

    fn of(&self, end: u32) -> u64 {
        self.prints.get(end as usize).copied().unwrap_or(0)
    }
}

/// The owner's answer to an [`Endpoint`]: the node's slot.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Resolved {
    reader: u32,
    end: u32,
    slot: u32,
}

/// Unknown node ids each owner shares to locate the first bad edge row.
const MAX_UNKNOWN_SHARED: usize = 10_000;

/// Endpoints a worker sends its owners at a time (2 MB).
const ENDPOINT_BATCH: usize = 1 << 16;

/// Reads this worker's share of the edge table; checks every row (features too: the first
/// row's length on every row, finite, no nulls; the split), that both endpoints are known
/// nodes, and fills each owner's in-degrees with the message-passing edges. Returns the
/// message-passing edges this worker read, with their features, their endpoints' slots and the
/// table's feature statistics, and the supervision edges `read` asks for.
///
/// The combiner keeps one count per distinct endpoint in one map (it is the map step's
/// hottest loop), not where each was seen; an unknown node's first row is found afterwards by
/// reading the rows again, which only a failing job does.
pub fn load_edges(
    worker: &mut Worker,
    io: &Io,
    table: &Place,
    nodes: &Rc<RefCell<NodeStore>>,
    read: EdgeRead,
) -> Result<ReadEdges, Error> {
    let edge_table = EdgeTable::open(worker, io, table, nodes, read)?;
    let mut reader = EdgeReader::new(worker, &edge_table, nodes, read);
    let read_rows = edge_table.units.iter().try_for_each(|&unit| reader.read_unit(io, &edge_table, unit));
    agree(worker, read_rows)?;
    let EdgeReader { edges, relations, features, unit_sums, supervised, rows, combiner, .. } = reader;
    let edge_stats = edge_stats(worker, edge_table.dim, unit_sums);
    let Combiner { end_of, ends, mut prints } = combiner;
    let conflict = prints.conflict.take();
    let (unknown, answers) = check_endpoints(worker, nodes, end_of, &prints)?;
    no_unknown_nodes(worker, io, &edge_table, read.relation, unknown, conflict)?;
    let total = cluster::sum(worker, rows);
    if total == 0 {
        return Err(Error::BadData(format!("{}: the edge table is empty", table.shown())));
    }
    let supervision = if read.supervision.is_some() {
        supervision::to_owners(worker, supervised, &nodes.borrow().owners)?
    } else {
        Vec::new()
    };
    // Every endpoint is known now: the owners' answers go back to the readers.
    let slots = answer_slots(worker, answers, ends.len())?;
    Ok(ReadEdges {
        edges,
        relations,
        edge_dim: edge_table.dim,
        features,
        edge_stats,
        ends,
        slots,
        supervision,
        ..ReadEdges::default()
    })
}

/// The edge table as this worker reads it: its files (the same on every worker), its feature
/// width, the node table's string ids (empty for integer ids) and this worker's units.
struct EdgeTable {
    files: Vec<ParquetFile>,
    dim: usize,
    strings: StringIds,
    units: Vec<(usize, usize)>,
}

impl EdgeTable {
    /// Opens `table` and agrees on its shape on every worker: the same optional columns, ids of
    /// the node table's kind, no `split` for a relation that has none, one feature width.
    fn open(
        worker: &mut Worker,
        io: &Io,
        table: &Place,
        nodes: &Rc<RefCell<NodeStore>>,
        read: EdgeRead,
    ) -> Result<Self, Error> {
        let files = open_agreed(worker, io, table)?;
        agree(worker, same_optional_columns(&files, &[LABEL, edges::SPLIT, edges::FEATURES]))?;
        let kind = nodes.borrow().id_kind();
        agree(worker, same_id_kind(&files, &[edges::SRC, edges::DST], kind))?;
        let strings = nodes.borrow().strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
        if read.relation.is_some_and(|r| !r.split) {
            agree(worker, no_split(&files))?;
        }
        let dim = agree(worker, edge_feature_dim(io, &files))?;
        let units = units(&files, worker.index(), worker.peers());
        Ok(EdgeTable { files, dim, strings, units })
    }
}

/// The combiner: each distinct endpoint's index in `ends` and the in-edges read here, in one
/// map entry (the count beside the index: one cache miss per endpoint of an edge), and the
/// endpoints' fingerprints. A worker cannot hold 2^32 edges, so a u32 count cannot overflow.
struct Combiner {
    end_of: IdTable<(u32, u32)>,
    ends: Vec<i64>,
    prints: Prints,
}

impl Combiner {
    /// Endpoint `node`'s entry (added when first seen), its fingerprint noted as read in `end`
    /// of row `i`.
    #[inline]
    fn see(&mut self, rows: &Rows, end: &End, i: usize, node: i64) -> &mut (u32, u32) {
        let entry = end_entry(&mut self.end_of, &mut self.ends, node);
        self.prints.see(entry.0, end.resolved.print(i), || rows.named(i, end));
        entry
    }
}

/// One endpoint column of a batch: as read, resolved to internal ids, and its name.
struct End<'a> {
    ids: &'a IdColumn,
    resolved: &'a schemas::ids::Resolved<'a>,
    column: &'static str,
}

/// One batch of edge rows being read, from row `first_row` of file number `file`.
struct Rows<'a> {
    batch: &'a EdgeBatch,
    src: End<'a>,
    dst: End<'a>,
    name: &'a str,
    file: u32,
    first_row: u64,
}

impl Rows<'_> {
    /// Row `i`'s (src, dst) as the graph keys them: typed keys for a relation's table, which
    /// fail for an id outside the typed range.
    #[inline]
    fn keys(&self, relation: Option<RelationRead>, i: usize) -> Result<(i64, i64), tables::Error> {
        let (src, dst) = (self.src.resolved.ids[i], self.dst.resolved.ids[i]);
        let Some(relation) = relation else { return Ok((src, dst)) };
        relation.keys(src, dst).map_err(|(column, id)| {
            let at = Location::file(self.name).row(self.first_row + i as u64).column(column);
            BadInput::new(at, format!("node id {id} is outside a typed graph's range [-2^55, 2^55)")).into()
        })
    }

    /// Row `i`'s place, and its `end` as read, for an error that names it.
    fn named(&self, i: usize, end: &End) -> (RowAt, String, &'static str) {
        ((self.file, self.first_row + i as u64), end.ids.key(i).to_string(), end.column)
    }
}

/// What this worker's read keeps: the message-passing edges, with their relations (typed) and
/// features (`dim` a row) aligned with them, each unit's feature sums, the supervision edges,
/// the rows read and the combiner.
struct EdgeReader {
    read: EdgeRead,
    dim: usize,
    edges: Vec<Edge>,
    relations: Vec<u8>,
    features: Vec<f32>,
    unit_sums: Vec<UnitSums>,
    supervised: Vec<SupervisionEdge>,
    rows: u64,
    combiner: Combiner,
}

impl EdgeReader {
    /// An empty read, its combiner sized up front so that it never grows: growing rehashes
    /// every endpoint at random into a table twice as large, freshly paged in (at 10M nodes,
    /// 16M slots of 16 bytes, past the cache). Every endpoint is a node, so the nodes read, real
    /// and checked, bound the size even where a file's metadata claims more rows than it holds;
    /// a table of unknown endpoints (an error) grows.
    fn new(worker: &mut Worker, table: &EdgeTable, nodes: &Rc<RefCell<NodeStore>>, read: EdgeRead) -> Self {
        let nodes_read = cluster::sum(worker, nodes.borrow().len() as u64);
        let rows_claimed: u64 = table.units.iter().map(|&(f, rg)| table.files[f].row_group_rows(rg)).sum();
        let end_of = IdTable::with_capacity(nodes_read.min(rows_claimed.saturating_mul(2)) as usize);
        EdgeReader {
            read,
            dim: table.dim,
            edges: Vec::new(),
            relations: Vec::new(),
            features: Vec::new(),
            unit_sums: Vec::new(),
            supervised: Vec::new(),
            rows: 0,
            combiner: Combiner { end_of, ends: Vec::new(), prints: Prints::default() },
        }
    }

    /// Reads unit `(f, rg)` row by row ([`EdgeReader::row`]) and keeps its feature sums.
    fn read_unit(&mut self, io: &Io, table: &EdgeTable, (f, rg): (usize, usize)) -> Result<(), Error> {
        let file = &table.files[f];
        let name = file.name();
        let mut sums = EdgeSums::new(self.dim);
        file.read_row_group(io, rg, |batch, first_row| {
            let batch = EdgeBatch::from_batch(&batch, &name, first_row, self.read.require_positive_weight)?;
            self.rows += batch.len() as u64;
            let (srcs, dsts) = (batch.src.resolve(&table.strings), batch.dst.resolve(&table.strings));
            let rows = Rows {
                batch: &batch,
                src: End { ids: &batch.src, resolved: &srcs, column: edges::SRC },
                dst: End { ids: &batch.dst, resolved: &dsts, column: edges::DST },
                name: &name,
                file: f as u32,
                first_row,
            };
            (0..batch.len()).try_for_each(|i| self.row(&rows, i, &mut sums))
        })?;
        if self.dim > 0 {
            self.unit_sums.push(UnitSums { unit: (f as u32, rg as u32), sums });
        }
        Ok(())
    }

    /// Reads row `i`: checks its ids and features, collects it as a supervision edge when
    /// asked, checks a held-out edge's endpoints, and keeps a message-passing edge
    /// ([`EdgeReader::keep`]).
    #[inline]
    fn row(&mut self, rows: &Rows, i: usize, sums: &mut EdgeSums) -> Result<(), tables::Error> {
        self.prefetch(rows, i + PREFETCH_ROWS);
        let (src, dst) = rows.keys(self.read.relation, i)?;
        let split = rows.batch.split(i);
        let row =
            if self.dim > 0 { rows.batch.features(i, self.dim, rows.name, rows.first_row + i as u64)? } else { &[] };
        if let (Some(sample), Some(split)) = (self.read.supervision, split)
            && sample.keeps(src, dst)
        {
            self.supervised.push(SupervisionEdge { src, dst, split });
        }
        if !passes_messages(split) {
            // Held out: its endpoints are checked, and nothing else is kept.
            self.combiner.see(rows, &rows.dst, i, dst);
            self.combiner.see(rows, &rows.src, i, src);
            return Ok(());
        }
        self.keep(rows, i, (src, dst), row, sums);
        Ok(())
    }

    /// Prefetches the combiner's entries for row `ahead`'s endpoints, if the batch has it.
    #[inline]
    fn prefetch(&self, rows: &Rows, ahead: usize) {
        if ahead < rows.batch.len() {
            let (src, dst) = (rows.src.resolved.ids[ahead], rows.dst.resolved.ids[ahead]);
            let (src, dst) = self.read.relation.and_then(|r| r.keys(src, dst).ok()).unwrap_or((src, dst));
            self.combiner.end_of.prefetch(dst);
            self.combiner.end_of.prefetch(src);
        }
    }

    /// Keeps message-passing row `i` (endpoints `(src, dst)`, features `row`): counts its
    /// in-edge at `dst` (and at `src` for a reversed relation), and pushes the edge, its
    /// relation and features (the reverse edge's too) so that they stay aligned.
    #[inline]
    fn keep(&mut self, rows: &Rows, i: usize, (src, dst): (i64, i64), row: &[f32], sums: &mut EdgeSums) {
        let d = self.combiner.see(rows, &rows.dst, i, dst);
        d.1 = d.1.saturating_add(1);
        let d = d.0;
        let s = self.combiner.see(rows, &rows.src, i, src);
        let weight = rows.batch.weight(i);
        self.edges.push(Edge { src: s.0, dst: d, weight });
        if let Some(relation) = self.read.relation {
            self.relations.push(relation.forward);
        }
        if self.dim > 0 {
            self.features.extend_from_slice(row);
            sums.add_row(row);
        }
        if let Some(reverse) = self.read.relation.and_then(|r| r.reverse) {
            s.1 = s.1.saturating_add(1);
            self.edges.push(Edge { src: d, dst: s.0, weight });
            self.relations.push(reverse);
            // The reversed edge carries the row's features too.
            self.features.extend_from_slice(row);
        }
    }
}

/// Sends each distinct endpoint to its owner, which checks it (a known node, in a graph keyed
/// by strings the string's fingerprint too) and adds its in-edges to the node's in-degree.
/// Returns the ids the owners found unknown and their answers (each known endpoint's slot),
/// both as this worker's owner side holds them. The combiner is released once sent.
fn check_endpoints(
    worker: &mut Worker,
    nodes: &Rc<RefCell<NodeStore>>,
    end_of: IdTable<(u32, u32)>,
    prints: &Prints,
) -> Result<(Vec<i64>, Vec<Resolved>), Error> {
    let me = worker.index() as u32;
    let unknown: Rc<RefCell<Vec<i64>>> = Rc::default();
    let answers: Rc<RefCell<Vec<Resolved>>> = Rc::default();
    let (owner_nodes, owner_unknown, owner_answers) = (nodes.clone(), unknown.clone(), answers.clone());
    let owners = nodes.borrow().owners.clone();
    let checked = shuffle(
        worker,
        move |m: &Endpoint| owners.key(m.node),
        move |m: Endpoint| {
            let mut store = owner_nodes.borrow_mut();
            let known = |slot: &usize| store.key(*slot).is_none_or(|key| StringHash::of(key).g == m.print);
            match store.slot(m.node).filter(known) {
                Some(slot) => {
                    store.in_degree[slot] += m.in_edges;
                    owner_answers.borrow_mut().push(Resolved { reader: m.reader, end: m.end, slot: slot as u32 });
                }
                None => owner_unknown.borrow_mut().push(m.node),
            }
        },
        |send| {
            // In batches straight from the combiner: a whole list would be one more array of
            // 24 bytes an endpoint, paged in to be read once.
            let mut batch = Vec::with_capacity(ENDPOINT_BATCH);
            for (node, (end, in_edges)) in end_of.iter() {
                batch.push(Endpoint { node, in_edges: u64::from(in_edges), reader: me, end, print: prints.of(end) });
                if batch.len() == ENDPOINT_BATCH {
                    send(std::mem::replace(&mut batch, Vec::with_capacity(ENDPOINT_BATCH)));
                }
            }
            send(batch);
            Ok::<(), Error>(())
        },
    );
    drop(end_of);
    agree(worker, checked)?;
    Ok((unknown.take(), answers.take()))
}

/// Fails on every worker alike when an owner found an `unknown` node, naming the first edge
/// row that names one, or when a row's string differs from its internal id's first (the
/// `conflict`). Every worker looks for the first row naming an unknown node. A table with very
/// many (an edge table of another graph) shares the smallest ids of each owner only: the error
/// then names one of them, at its first row.
fn no_unknown_nodes(
    worker: &mut Worker,
    io: &Io,
    table: &EdgeTable,
    relation: Option<RelationRead>,
    mut unknown: Vec<i64>,
    conflict: Option<(RowAt, String, &'static str)>,
) -> Result<(), Error> {
    let files = &table.files;
    unknown.sort_unstable();
    unknown.truncate(MAX_UNKNOWN_SHARED);
    let unknown: IdSet<i64> = all_gather(worker, unknown).into_iter().collect();
    if !unknown.is_empty() {
        let first = first_unknown(io, files, &table.units, &unknown, relation, &table.strings).and_then(|found| {
            found.map_or(Ok(()), |(at, node, column)| {
                Err(BadInput::new(locate(files, at, column), format!("edge names unknown node {node}")).into())
            })
        });
        agree(worker, first)?;
    }
    let conflict = conflict.map_or(Ok(()), |(at, node, column)| {
        Err(BadInput::new(locate(files, at, column), format!("edge names unknown node {node}")).into())
    });
    agree(worker, conflict)
}

/// The owners' `answers` back to their readers: each of this worker's `ends` endpoints' slot
/// at its owner, by its index in `ends`.
fn answer_slots(worker: &mut Worker, answers: Vec<Resolved>, ends: usize) -> Result<Vec<u32>, Error> {
    let slots = Rc::new(RefCell::new(vec![u32::MAX; ends]));
    let sink = slots.clone();
    shuffle(
        worker,
        |a: &Resolved| u64::from(a.reader),
        move |a: Resolved| sink.borrow_mut()[a.end as usize] = a.slot,
        |send| {
            send(answers);
            Ok::<(), Error>(())
        },
    )?;
    Ok(slots.take())
}
