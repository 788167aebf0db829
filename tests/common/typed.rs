//! The generated typed graph (`graphflat generate --hetero`: users, items and shops; buys,
//! returns, follows and sells) for the end-to-end tests: its `[graph]`, its tables read back
//! as plain maps, and an independent typed BFS under the records' sampling rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use sampling::sample::Candidate;
use schemas::Sampler;
use schemas::record::FlattenMeta;
use schemas::typed::pack;

use super::{parquet_files, read_batches, run_ok, write_job};

pub const SEED: u64 = 3;
pub const FANOUTS: [u32; 2] = [4, 3];
pub const RETURNS_FANOUTS: [u32; 2] = [2, 2];

/// The `[graph]` of a generated typed graph in `data`: buys and returns reversed, returns with
/// its own fanouts.
pub fn graph_tables(data: &Path) -> String {
    graph_text(data, false)
}

/// [`graph_tables`], with follows and sells reversed too when `reverse_all`.
pub fn graph_text(data: &Path, reverse_all: bool) -> String {
    let also = if reverse_all { "reverse = true\n" } else { "" };
    let table = |dir: &str| data.join(dir).display().to_string();
    let mut text = String::new();
    for t in ["user", "item", "shop"] {
        text += &format!("[graph.node_types.{t}]\ntable = {:?}\n", table(&format!("nodes/{t}")));
    }
    for (r, src, dst, extra) in [
        ("buys", "user", "item", "reverse = true\n".to_owned()),
        ("returns", "user", "item", format!("reverse = true\nfanouts = {RETURNS_FANOUTS:?}\n")),
        ("follows", "user", "user", also.to_owned()),
        ("sells", "shop", "item", also.to_owned()),
    ] {
        let path = table(&format!("edges/{r}"));
        text += &format!("[graph.relations.{r}]\nsrc = {src:?}\ndst = {dst:?}\ntable = {path:?}\n{extra}");
    }
    text
}

/// Flattens the typed graph in `data` into `dir/<name>` with `flatten` keys added.
pub fn flatten_typed(dir: &Path, data: &Path, name: &str, flatten: &str, args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let job = format!(
        "{}[flatten]\noutput = {:?}\ntarget_type = \"user\"\nhops = 2\nfanouts = {FANOUTS:?}\nseed = {SEED}\n{flatten}",
        graph_tables(data),
        out.display().to_string()
    );
    run_ok(&write_job(dir, name, &job), args);
    out
}

/// A node of the typed graph: (type, id).
pub type Node = (String, i64);

/// An in-edge: (relation, src, weight, edge features).
pub type InEdge = (String, Node, f32, Vec<f32>);

/// An in-edge ranked for sampling: its key, source and features.
pub type Ranked<'a> = (Candidate, &'a Node, &'a [f32]);

/// The typed graph as plain maps, read back from its tables (a relation table's `valid` and
/// `test` edges left out).
pub struct Typed {
    pub features: BTreeMap<Node, Vec<f32>>,
    pub labels: BTreeMap<i64, i64>,
    /// Per destination, its in-edges.
    pub in_edges: BTreeMap<Node, Vec<InEdge>>,
    /// Each type's index in the records (types are numbered by name).
    pub type_index: BTreeMap<String, u8>,
}

pub fn read_typed(data: &Path) -> Typed {
    let type_index: BTreeMap<String, u8> =
        ["item", "shop", "user"].iter().enumerate().map(|(i, t)| (t.to_string(), i as u8)).collect();
    let mut g = Typed { features: BTreeMap::new(), labels: BTreeMap::new(), in_edges: BTreeMap::new(), type_index };
    for t in ["user", "item", "shop"] {
        for batch in read_batches(&data.join("nodes").join(t)) {
            let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
            let features = batch.column_by_name("features").unwrap().as_list::<i32>();
            for r in 0..batch.num_rows() {
                let values = features.value(r).as_primitive::<Float32Type>().values().to_vec();
                g.features.insert((t.to_owned(), ids.value(r)), values);
                if let Some(labels) = batch.column_by_name("label") {
                    g.labels.insert(ids.value(r), labels.as_primitive::<Int64Type>().value(r));
                }
            }
        }
    }
    for (r, src_type, dst_type, reverse) in [
        ("buys", "user", "item", true),
        ("returns", "user", "item", true),
        ("follows", "user", "user", false),
        ("sells", "shop", "item", false),
    ] {
        for batch in read_batches(&data.join("edges").join(r)) {
            let src = batch.column_by_name("src").unwrap().as_primitive::<Int64Type>();
            let dst = batch.column_by_name("dst").unwrap().as_primitive::<Int64Type>();
            let w = batch.column_by_name("weight").unwrap().as_primitive::<Float32Type>();
            let features = batch.column_by_name("features").map(|f| f.as_list::<i32>().clone());
            // A link relation's held-out edges pass no messages.
            let split = batch.column_by_name("split").map(|s| s.as_string::<i32>().clone());
            let held_out = |i: usize| split.as_ref().is_some_and(|s| s.is_valid(i) && s.value(i) != "train");
            for i in (0..batch.num_rows()).filter(|&i| !held_out(i)) {
                let (s, d) = ((src_type.to_owned(), src.value(i)), (dst_type.to_owned(), dst.value(i)));
                let e: Vec<f32> = features
                    .as_ref()
                    .map_or_else(Vec::new, |f| f.value(i).as_primitive::<Float32Type>().values().to_vec());
                g.in_edges.entry(d.clone()).or_default().push((r.to_owned(), s.clone(), w.value(i), e.clone()));
                if reverse {
                    g.in_edges.entry(s).or_default().push((format!("rev_{r}"), d, w.value(i), e));
                }
            }
        }
    }
    g
}

/// A record as comparable sets: nodes (type, id, hop, in-degree, features' bits) and edges
/// (dst, src, relation, weight bits, layer mask, edge features' bits).
pub type Shape = (BTreeSet<(Node, u8, i64, Vec<u32>)>, BTreeSet<(Node, Node, String, u32, u32, Vec<u32>)>);

pub fn bits_of(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// The independent typed BFS: a node at hop `d < k` keeps, of each relation's in-edges ranked
/// by sampling key (the typed keys of its ends), rank `i` for layer `l` when `i <
/// fanouts[k - l]` of that relation; an edge serving some layer joins the record, and its
/// source joins at hop `d + 1` unless seen.
pub fn bfs(g: &Typed, root: Node, fanouts: impl Fn(&str) -> [u32; 2]) -> Shape {
    let k = 2;
    let key = |n: &Node| pack(g.type_index[&n.0], n.1).unwrap();
    let mut hops: BTreeMap<Node, u8> = BTreeMap::from([(root.clone(), 0)]);
    let mut frontier = vec![root];
    let mut edges = BTreeSet::new();
    for d in 0..k {
        let mut next = Vec::new();
        for v in &frontier {
            let mut by_relation: BTreeMap<&str, Vec<Ranked>> = BTreeMap::new();
            for (r, src, w, e) in g.in_edges.get(v).into_iter().flatten() {
                by_relation.entry(r).or_default().push((
                    Candidate::new(Sampler::Uniform, SEED, key(v), key(src), *w),
                    src,
                    e,
                ));
            }
            for (r, mut ranked) in by_relation {
                ranked.sort_by_key(|a| a.0);
                for (i, (c, src, e)) in ranked.iter().enumerate() {
                    let mask: u32 = (1..=k - d).filter(|&l| (i as u32) < fanouts(r)[k - l]).map(|l| 1 << (l - 1)).sum();
                    if mask == 0 {
                        continue;
                    }
                    edges.insert((v.clone(), (*src).clone(), r.to_owned(), c.weight.to_bits(), mask, bits_of(e)));
                    if !hops.contains_key(*src) {
                        hops.insert((*src).clone(), d as u8 + 1);
                        next.push((*src).clone());
                    }
                }
            }
        }
        frontier = next;
    }
    let in_degree = |n: &Node| g.in_edges.get(n).map_or(0, Vec::len) as i64;
    let bits = |n: &Node| g.features[n].iter().map(|v| v.to_bits()).collect();
    (hops.iter().map(|(n, &h)| (n.clone(), h, in_degree(n), bits(n))).collect(), edges)
}

/// A written record as the same sets, with its types and relations by name.
pub fn shape_of(r: &schemas::Record, meta: &FlattenMeta) -> Shape {
    let types = meta.types.as_ref().unwrap();
    let node = |i: usize| (types.node_types[r.node_types[i] as usize].name.clone(), r.node_ids[i]);
    let nodes = (0..r.num_nodes())
        .map(|i| (node(i), r.hops[i], r.in_degrees[i], r.node_features(i).iter().map(|v| v.to_bits()).collect()))
        .collect();
    let edges = (0..r.num_edges())
        .map(|j| {
            let relation = types.relations[r.edge_relations[j] as usize].name.clone();
            let (s, d) = (r.edge_src[j] as usize, r.edge_dst[j] as usize);
            let features = bits_of(r.edge_features_of(j));
            (node(d), node(s), relation, r.edge_weights[j].to_bits(), r.edge_layers[j], features)
        })
        .collect();
    (nodes, edges)
}

pub fn meta_of(out: &Path) -> FlattenMeta {
    let file = std::fs::File::open(&parquet_files(out)[0]).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    FlattenMeta::read(reader.schema().metadata()).unwrap()
}

/// One typed output row: (embedding, prediction, scores), the last two null off the target type.
pub type TypedScored = (Vec<f32>, Option<i64>, Option<Vec<f32>>);

/// GraphInfer's output of a typed graph by (type, id), read with parquet's Arrow reader.
pub fn read_typed_scores(dir: &Path) -> BTreeMap<Node, TypedScored> {
    let mut out = BTreeMap::new();
    for batch in read_batches(dir) {
        let types = batch.column_by_name("node_type").unwrap().as_string::<i32>();
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let embedding = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        let prediction = batch.column_by_name("prediction").unwrap().as_primitive::<Int64Type>();
        // Null off the target type: a plain list (see graphinfer::output).
        let scores = batch.column_by_name("scores").unwrap().as_list::<i32>();
        let floats = |values: arrow_array::ArrayRef| values.as_primitive::<Float32Type>().values().to_vec();
        for r in 0..batch.num_rows() {
            let row = (
                floats(embedding.value(r)),
                prediction.is_valid(r).then(|| prediction.value(r)),
                scores.is_valid(r).then(|| floats(scores.value(r))),
            );
            let node = (types.value(r).to_owned(), ids.value(r));
            assert!(out.insert(node.clone(), row).is_none(), "{node:?} written twice");
        }
    }
    out
}

/// A generated typed graph (buys with 4 edge features) whose buys table has a split column:
/// `dir/data`, with the other tables linked from the generated graph.
pub fn split_typed(dir: &Path) -> PathBuf {
    let generated = dir.join("generated");
    let out = generated.to_str().unwrap();
    super::graphflat_ok(&[
        "generate",
        "--hetero",
        "--out",
        out,
        "--nodes",
        "1500",
        "--seed",
        "6",
        "--edge-feature-dim",
        "4",
    ]);
    let data = dir.join("data");
    std::fs::create_dir_all(data.join("edges")).unwrap();
    std::os::unix::fs::symlink(generated.join("nodes"), data.join("nodes")).unwrap();
    for r in ["returns", "follows", "sells"] {
        std::os::unix::fs::symlink(generated.join("edges").join(r), data.join("edges").join(r)).unwrap();
    }
    let (buys, split) = (generated.join("edges/buys"), data.join("edges/buys"));
    let args = ["--valid", "0.1", "--test", "0.1", "--seed", "2"];
    super::graphflat_ok(
        &[&["split-edges", "--edges", buys.to_str().unwrap(), "--out", split.to_str().unwrap()], &args[..]].concat(),
    );
    data
}
