//! Link record sets assembled from node records, laid out as GraphFlat's link records are (each
//! endpoint's neighborhood is that node's own node record), for the trainer's tests until
//! GraphFlat writes them: one supervision edge per unordered pair of the edge table, its split
//! from a hash of the pair (10% test, 5% valid), negatives drawn by a seeded hash rule. The
//! message-passing graph holds the training edges only, so no valid or test edge leaks into a
//! neighborhood.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use schemas::record::{FlattenMeta, LinkRecord, links_to_batch, record_schema};
use schemas::task::{LinkSpec, NegativeSampler};
use schemas::{Record, Split};
use tables::commit::Stage;
use tables::table::TableWriter;

use super::{Job, flatten, local_io, read_graph, read_records};

/// A hash of words (splitmix64 finalizer over a running mix): the tests' own rule.
fn hash(words: &[u64]) -> u64 {
    words.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &w| {
        let mut z = (h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// The split of the unordered pair {a, b}: test 10%, valid 5%, train the rest.
pub fn pair_split(a: i64, b: i64, seed: u64) -> Split {
    match hash(&[seed, a.min(b) as u64, a.max(b) as u64]) % 100 {
        0..10 => Split::Test,
        10..15 => Split::Valid,
        _ => Split::Train,
    }
}

/// How a test's link record set is made.
#[derive(Debug, Clone, Copy)]
pub struct LinkSettings {
    pub hops: i64,
    pub negatives: usize,
    pub seed: u64,
    /// Part 0 holds the train and valid records, part 1 the test records (else one part).
    pub split_parts: bool,
}

/// Flattens the node table of `data` (a `graphflat generate` or `import` output) over its
/// training edges, and writes link records of its edges into `dir/<name>`. Returns the set's
/// directory and its records.
pub fn link_set(dir: &Path, data: &Path, name: &str, s: LinkSettings) -> (PathBuf, Vec<LinkRecord>) {
    let graph = read_graph(data);
    let mut pairs = BTreeSet::new();
    let supervision: Vec<(i64, i64)> = graph
        .edges
        .iter()
        .map(|&(a, b, _)| (a, b))
        .filter(|&(a, b)| a != b && pairs.insert((a.min(b), a.max(b))))
        .collect();
    let train_edges: Vec<(i64, i64)> = graph
        .edges
        .iter()
        .map(|&(a, b, _)| (a, b))
        .filter(|&(a, b)| pair_split(a, b, s.seed) == Split::Train)
        .collect();
    let edges = dir.join(format!("{name}-train-edges.parquet"));
    write_edges(&edges, &train_edges);
    let nodes = flatten(dir, data, &format!("{name}-nodes"), &[], |job: Job| {
        job.key("edges", edges.to_str().unwrap()).key("hops", s.hops).key("sampler", "all").key("seed", s.seed as i64)
    });
    let records: BTreeMap<i64, Record> =
        read_records(&nodes).into_iter().map(|r| (r.root, Record { label: None, split: None, ..r })).collect();
    let ids: Vec<i64> = records.keys().copied().collect();
    let links: Vec<LinkRecord> = supervision
        .iter()
        .map(|&(src, dst)| {
            let negatives: Vec<i64> = (0..s.negatives as u64)
                .map(|i| ids[(hash(&[s.seed, src as u64, dst as u64, i]) % ids.len() as u64) as usize])
                .collect();
            let endpoints =
                [src, dst].iter().chain(&negatives).map(|id| std::sync::Arc::new(records[id].clone())).collect();
            LinkRecord { src, dst, split: Some(pair_split(src, dst, s.seed)), negatives, endpoints }
        })
        .collect();
    let meta = FlattenMeta {
        types: None,
        relation_fanouts: Vec::new(),
        string_ids: false,
        precomputed: None,
        root_neighbors: false,
        link: Some(LinkSpec {
            negatives: s.negatives,
            negative_sampler: NegativeSampler::Uniform,
            disjoint_train: false,
            supervision_fraction: 1.0,
            relation: None,
        }),
        ..graphtrainer::reader::RecordSet::open(local_io(), nodes.to_str().unwrap()).unwrap().meta
    };
    let out = dir.join(name);
    let parts: Vec<Vec<LinkRecord>> = if s.split_parts {
        let (first, second) = links.iter().cloned().partition(|l| l.split != Some(Split::Test));
        vec![first, second]
    } else {
        vec![links.clone()]
    };
    write_link_set(&out, &meta, &parts);
    (out, links)
}

/// Writes `parts` as a finished link record set (one part file each, `_SUCCESS` last).
pub fn write_link_set(dir: &Path, meta: &FlattenMeta, parts: &[Vec<LinkRecord>]) {
    let io = local_io();
    let schema = Arc::new(record_schema(meta));
    let place = io.place(dir.to_str().unwrap()).unwrap();
    let writer = TableWriter::start(&io, &place, Stage::Flatten, &[], true).unwrap();
    for (i, part) in parts.iter().enumerate() {
        let batches: Vec<RecordBatch> = part.chunks(512).map(|c| links_to_batch(c, &schema).unwrap()).collect();
        writer.write(i, schema.clone(), &batches).unwrap();
    }
    writer.commit().unwrap();
}

/// An edge table of `src`, `dst` in one Parquet file.
pub fn write_edges(path: &Path, edges: &[(i64, i64)]) {
    let column = |values: Vec<i64>| Arc::new(Int64Array::from(values)) as ArrayRef;
    let batch = RecordBatch::try_from_iter([
        ("src", column(edges.iter().map(|e| e.0).collect())),
        ("dst", column(edges.iter().map(|e| e.1).collect())),
    ])
    .unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}
