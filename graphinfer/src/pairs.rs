//! The pairs round of a link model (`[infer] pairs`): every candidate pair's score from the
//! final embeddings, which are never gathered in one place.
//!
//! 1. **read**: each worker reads its share of the pairs table's row groups (numbered alike on
//!    every worker, as the map step reads the node and edge tables), only `src` and `dst`,
//!    checking every row;
//! 2. **relay** (`cluster::relay`): each pair goes to the owner of `src`, which attaches
//!    `h_src` (its row of the model's last layer), then to the owner of `dst`, which attaches
//!    `h_dst` and scores the pair with the model's decoder on the host
//!    (`gnn::decoder::PairScorer`). The relay is streamed: a pair passes the owner of `src`
//!    as it comes;
//! 3. **write**: the owner of `dst` sorts the pairs it scored by (src, dst) and writes them as
//!    parts of `pairs_output` (one row per row of the table, repeats included).
//!
//! A pair carries its row's place (file, row), so the owner that finds an endpoint missing from
//! the node table names it; the job's error is the first such row of the table (by file, then
//! row), the same on any number of workers.
//!
//! A typed link model's pairs are a source of its link relation's source type and a
//! destination of its destination type ([`PairTypes`]): ids become typed keys as they are read
//! and plain ids again as they are scored.
//!
//! Memory per worker, besides the embeddings it owns: the pairs it scored until they are
//! written (32 bytes each, and the two strings in a graph keyed by strings: its share of the
//! table by `dst`), and the batches in flight (a pair carries one embedding row between the two
//! owners).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, StringArray};
use arrow_schema::SchemaRef;
use cluster::{all_gather, relay};
use gnn::decoder::PairScorer;
use parquet::file::properties::EnabledStatistics;
use parquet::schema::types::ColumnPath;
use sampling::{NodeStore, agree};
use schemas::facts::LinearCounts;
use schemas::ids::{IdColumn, IdKind, StringHash, StringIds};
use schemas::pairs::{self, DST, PairBatch, SRC};
use schemas::{BadInput, Location};
use serde::{Deserialize, Serialize};
use stage::Worker;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Io, ParquetFile, Place, open_table, units};

use crate::Error;

/// A row's place: file number (in the table's file order) and 0-based row in that file.
type RowAt = (u32, u64);

/// The candidate pairs table, opened: its files in order, each checked for `src` and `dst`
/// columns of type `int64` before any row is read.
pub struct Candidates {
    pub place: Place,
    files: Vec<ParquetFile>,
}

impl Candidates {
    pub fn open(io: &Io, uri: &str) -> Result<Candidates, Error> {
        let place = io.place(uri)?;
        let files = open_table(io, &place)?;
        // Integers or strings, every file alike; that they are the node table's kind is
        // checked once the node table is open.
        let kind = sampling::load::id_kind(&files, &[SRC, DST])?;
        for file in &files {
            pairs::check_schema(file.arrow.schema(), &file.name(), kind)?;
        }
        Ok(Candidates { place, files })
    }

    /// That the pairs' ids are of the node table's kind (`nodes`).
    pub fn check_kind(&self, nodes: IdKind) -> Result<(), Error> {
        sampling::load::same_id_kind(&self.files, &[SRC, DST], nodes)
    }
}

/// A pair on its way to the owner of `src`; `prints` are its strings' fingerprints (0 for
/// integer ids).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pair {
    src: i64,
    dst: i64,
    at: RowAt,
    prints: [u64; 2],
}

/// A pair with its source's embedding (and original string), on its way to the owner of `dst`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Half {
    src: i64,
    dst: i64,
    at: RowAt,
    dst_print: u64,
    src_key: Option<String>,
    h_src: Vec<f32>,
}

/// A scored pair, at the worker that writes it; `keys` are its original strings in a graph keyed
/// by strings.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub src: i64,
    pub dst: i64,
    pub score: f32,
    pub keys: Option<Box<(String, String)>>,
}

/// An endpoint that is not a node of the node table: where, which column, which id.
type Unknown = (RowAt, End, i64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum End {
    Src,
    Dst,
}

/// A typed link model's pair ends: the node type of `src` and of `dst`, with their names.
#[derive(Debug, Clone)]
pub struct PairTypes {
    pub types: [u8; 2],
    pub names: [String; 2],
}

impl PairTypes {
    fn name(&self, end: End) -> &str {
        &self.names[end as usize]
    }
}

/// Each node's embedding: this worker's nodes' rows of the model's last layer, by slot.
pub struct Embeddings {
    pub nodes: Rc<NodeStore>,
    pub rows: Vec<f32>,
    pub width: usize,
}

impl Embeddings {
    /// The row of `node` and its original string, if this worker owns it (in a graph keyed by
    /// strings, if its string's fingerprint is `print`).
    fn row(&self, node: i64, print: u64) -> Option<(&[f32], Option<&str>)> {
        let s = self.nodes.slot(node)?;
        let key = self.nodes.key(s);
        if key.is_some_and(|key| StringHash::of(key).g != print) {
            return None;
        }
        Some((&self.rows[s * self.width..(s + 1) * self.width], key))
    }
}

/// Steps 1 and 2 (see the module doc): the pairs this worker scored, sorted by (src, dst).
/// Every worker returns the same error for a bad row or an unknown endpoint.
pub fn score(
    worker: &mut timely::worker::Worker,
    io: &Io,
    table: &Candidates,
    embeddings: Embeddings,
    scorer: PairScorer,
    typed: Option<&PairTypes>,
) -> Result<Vec<Scored>, Error> {
    let plain = typed.is_some();
    let plain = move |key: i64| if plain { schemas::typed::unpack(key).1 } else { key };
    let types = typed.map(|t| t.types);
    let strings = embeddings.nodes.strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
    let strings_graph = embeddings.nodes.strings.is_some();
    let at_src = Rc::new(embeddings);
    let unknown: Rc<RefCell<Option<Unknown>>> = Rc::default();
    let scored: Rc<RefCell<Vec<Scored>>> = Rc::default();
    let (at_dst, src_unknown, dst_unknown, sink) = (at_src.clone(), unknown.clone(), unknown.clone(), scored.clone());
    let note = |found: &Rc<RefCell<Option<Unknown>>>, u: Unknown| {
        let mut first = found.borrow_mut();
        *first = Some(first.map_or(u, |f| f.min(u)));
    };
    let my_units = units(&table.files, worker.index(), worker.peers());
    let (src_owners, dst_owners) = (at_src.nodes.owners.clone(), at_src.nodes.owners.clone());
    let read = relay(
        worker,
        move |p: &Pair| src_owners.key(p.src),
        move |p: Pair| match at_src.row(p.src, p.prints[0]) {
            Some((h, key)) => Some(Half {
                src: p.src,
                dst: p.dst,
                at: p.at,
                dst_print: p.prints[1],
                src_key: key.map(str::to_owned),
                h_src: h.to_vec(),
            }),
            None => {
                note(&src_unknown, (p.at, End::Src, p.src));
                None
            }
        },
        move |h: &Half| dst_owners.key(h.dst),
        move |h: Half| match at_dst.row(h.dst, h.dst_print) {
            Some((row, key)) => {
                let score = scorer.score(&h.h_src, row);
                let keys = h.src_key.zip(key.map(str::to_owned)).map(Box::new);
                sink.borrow_mut().push(Scored { src: plain(h.src), dst: plain(h.dst), score, keys })
            }
            None => note(&dst_unknown, (h.at, End::Dst, h.dst)),
        },
        |send| read_pairs(io, &table.files, &my_units, types, &strings, send),
    );
    agree(worker, read)?;
    // Sorted, so every worker takes the same first row.
    if let Some(first) = all_gather(worker, unknown.take().into_iter().collect()).into_iter().next() {
        return Err(unknown_endpoint(io, table, first, typed, strings_graph));
    }
    let mut scored = scored.take();
    scored.sort_unstable_by_key(|s| (s.src, s.dst));
    Ok(scored)
}

/// The error of a pair whose endpoint (`node`, at `at`, its `end`) no worker holds: its file,
/// row and column, and the node as the table names it.
fn unknown_endpoint(
    io: &Io,
    table: &Candidates,
    (at, end, node): Unknown,
    typed: Option<&PairTypes>,
    strings_graph: bool,
) -> Error {
    let column = if end == End::Src { SRC } else { DST };
    let file = table.files[at.0 as usize].name();
    let plain = if typed.is_some() { schemas::typed::unpack(node).1 } else { node };
    // A string travelled as hashes: the failing row's string is read back to name it.
    let id = if strings_graph { id_at(io, &table.files, at, column) } else { Some(plain.to_string()) };
    let problem = match (typed.map(|t| t.name(end)), id) {
        (None, Some(id)) => format!("pair names unknown node {id} (not in the node table)"),
        (None, None) => "pair names unknown node (not in the node table)".into(),
        (Some(name), Some(id)) => format!("pair names unknown {name} {id} (not in the {name} table)"),
        (Some(name), None) => format!("pair names unknown {name} (not in the {name} table)"),
    };
    BadInput::new(Location::file(file).row(at.1).column(column), problem).into()
}

/// The id at `at` of `column`, as the table has it: a pair keyed by strings travels as hashes,
/// and a failing job reads its first bad row's string back to name it.
fn id_at(io: &Io, files: &[ParquetFile], at: RowAt, column: &str) -> Option<String> {
    let file = files.get(at.0 as usize)?;
    let (name, mut first) = (file.name(), 0u64);
    for rg in 0..file.row_groups() {
        let rows = file.row_group_rows(rg);
        if at.1 < first + rows {
            let mut found = None;
            let read = file.read_columns(io, rg, Some(&[column]), |batch, first_row| {
                let ids = IdColumn::read(&batch, column, &name, first_row)?;
                if (first_row..first_row + ids.len() as u64).contains(&at.1) {
                    found = Some(ids.key((at.1 - first_row) as usize).to_string());
                }
                Ok(())
            });
            return read.ok().and(found);
        }
        first += rows;
    }
    None
}

/// Step 1: this worker's row groups of the table, checked, sent on batch by batch.
/// On a typed model's pairs (`types`: the source's and destination's node type) the ids are
/// sent as typed keys.
fn read_pairs(
    io: &Io,
    files: &[ParquetFile],
    my_units: &[(usize, usize)],
    types: Option<[u8; 2]>,
    strings: &StringIds,
    send: &mut dyn FnMut(Vec<Pair>),
) -> Result<(), Error> {
    for &(f, rg) in my_units {
        let name = files[f].name();
        files[f].read_columns(io, rg, Some(&[SRC, DST]), |batch, first_row| {
            let pairs = PairBatch::from_batch(&batch, &name, first_row)?;
            let key = |i: usize, end: End, id: i64| match types {
                None => Ok(id),
                Some(types) => schemas::typed::pack(types[end as usize], id).ok_or_else(|| {
                    let column = if end == End::Src { SRC } else { DST };
                    let at = Location::file(name.as_str()).row(first_row + i as u64).column(column);
                    BadInput::new(at, format!("node id {id} is outside a typed graph's range [-2^55, 2^55)"))
                }),
            };
            // Each string hashed once, for its internal id and its fingerprint.
            let (srcs, dsts) = (pairs.src.resolve(strings), pairs.dst.resolve(strings));
            let pairs = (0..pairs.len())
                .map(|i| {
                    let src = key(i, End::Src, srcs.ids[i])?;
                    let dst = key(i, End::Dst, dsts.ids[i])?;
                    let prints = [srcs.print(i).unwrap_or(0), dsts.print(i).unwrap_or(0)];
                    Ok(Pair { src, dst, at: (f as u32, first_row + i as u64), prints })
                })
                .collect::<Result<Vec<Pair>, BadInput>>()?;
            send(pairs);
            Ok(())
        })?;
    }
    Ok(())
}

/// Rows per written batch.
const WRITE_ROWS: usize = 65_536;

/// Bins of the pair score distribution in the run's facts (the report's chart).
pub const SCORE_BINS: usize = 20;

/// What this worker wrote into `pairs_output`.
#[derive(Debug, Default)]
pub struct PairsWritten {
    pub rows: u64,
    pub bytes: u64,
    pub parts: u32,
    pub entries: Vec<StagedPart>,
    /// The pairs by the sigmoid of their score (see [`SCORE_BINS`]).
    pub scores: LinearCounts,
}

/// Step 3: this worker's scored pairs (sorted) as parts under `to`, with `metadata` in the
/// schema; every worker returns the same error.
pub fn write(
    worker: &mut Worker,
    to: &PartsOf,
    scored: &[Scored],
    kind: IdKind,
    metadata: HashMap<String, String>,
    part_limit: u64,
) -> Result<PairsWritten, Error> {
    let schema: SchemaRef = Arc::new(pairs::score_schema(kind, metadata));
    let props =
        part_properties().set_column_statistics_enabled(ColumnPath::from(SRC), EnabledStatistics::Chunk).build();
    let mut writer = PartWriter::new(worker.io.clone(), to.clone(), schema.clone(), props, part_limit);
    let result = (|| {
        for chunk in scored.chunks(WRITE_ROWS) {
            let (src, dst) = ends(chunk, kind);
            let score = chunk.iter().map(|s| s.score).collect();
            let batch = pairs::score_batch(schema.clone(), src, dst, score)
                .map_err(|source| Error::Arrow { file: writer.current_name(), source })?;
            writer.write(&batch)?;
        }
        writer.finish()
    })();
    agree(worker.timely, result)?;
    Ok(PairsWritten {
        rows: scored.len() as u64,
        bytes: writer.bytes_written,
        parts: writer.parts_written,
        entries: writer.parts.clone(),
        scores: score_counts(scored),
    })
}

/// The `src` and `dst` columns of `chunk`: the ids, or the original strings.
fn ends(chunk: &[Scored], kind: IdKind) -> (ArrayRef, ArrayRef) {
    if kind == IdKind::String {
        let key = |s: &Scored, end: usize| s.keys.as_ref().map(|k| if end == 0 { k.0.clone() } else { k.1.clone() });
        let column = |end| Arc::new(chunk.iter().map(|s| key(s, end)).collect::<StringArray>()) as ArrayRef;
        return (column(0), column(1));
    }
    let column = |f: fn(&Scored) -> i64| Arc::new(chunk.iter().map(f).collect::<Int64Array>()) as ArrayRef;
    (column(|s| s.src), column(|s| s.dst))
}

/// The distribution of `scored`'s sigmoid scores.
fn score_counts(scored: &[Scored]) -> LinearCounts {
    let mut counts = LinearCounts::new(SCORE_BINS);
    for s in scored {
        counts.add(1.0 / (1.0 + (-f64::from(s.score)).exp()), 0.0, 1.0);
    }
    counts
}
