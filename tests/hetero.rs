//! Typed graphs through the three stages, end to end: records of a generated typed graph
//! (users, items, shops; four relations, two of them reversed; a relation with its own
//! fanouts) equal an independent typed BFS under the same sampling rule, with hub re-indexing
//! on and off and on one or two workers; typed models beat the same models with relations
//! erased; GraphInfer's scores equal the trainer's forward pass on every record, the same bits
//! on any cluster, with a row for every node of every type; and bad inputs are errors naming
//! the type or relation, the file, row and column.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::typed::*;
use crate::common::*;

#[test]
fn typed_records_equal_an_independent_typed_bfs_with_and_without_reindexing() {
    let dir = scratch("hetero-bfs");
    let data = dir.join("graph");
    // buys edges carry 4 features, follows 2, returns and sells none.
    let generate = ["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "3000", "--seed", "5"];
    graphflat_ok(&[&generate[..], &["--edge-feature-dim", "4"]].concat());
    let g = read_typed(&data);
    let fanouts = |r: &str| if r.ends_with("returns") { RETURNS_FANOUTS } else { FANOUTS };

    let hubs = flatten_typed(&dir, &data, "hubs", "hub_threshold = 20\ntargets = [\"train\"]\n", &["--workers", "2"]);
    let plain = flatten_typed(&dir, &data, "plain", "hub_threshold = 0\ntargets = [\"train\"]\n", &["--workers", "1"]);
    let meta = meta_of(&hubs);
    let types = meta.types.clone().unwrap();
    assert_eq!(types.node_types_text(), "item:16,shop:8,user:32", "each type keeps its own width");
    assert_eq!(types.target_name(), "user");
    assert_eq!(meta.relation_fanouts.len(), 6, "four relations and two reversed");
    let widths: Vec<(&str, usize)> = types.relations.iter().map(|r| (r.name.as_str(), r.edge_dim)).collect();
    let expected = [("buys", 4), ("follows", 2), ("returns", 0), ("rev_buys", 4), ("rev_returns", 0), ("sells", 0)];
    assert_eq!(widths, expected, "each relation's edge feature width; a reversed one has its table's");
    // Each featured relation's statistics are its table's (rev_buys has buys'), checked in f64.
    for (r, relation) in types.relations.iter().enumerate() {
        let stats = &meta.relation_edge_stats[r];
        let table = relation.name.trim_start_matches("rev_");
        let rows: Vec<&Vec<f32>> =
            g.in_edges.values().flatten().filter(|e| e.0 == table && !e.3.is_empty()).map(|e| &e.3).collect();
        assert_eq!(stats.is_some(), relation.edge_dim > 0, "{}", relation.name);
        for (c, (&mean, &std)) in stats.iter().flat_map(|s| s.mean.iter().zip(&s.std)).enumerate() {
            let values: Vec<f64> = rows.iter().map(|e| f64::from(e[c])).collect();
            let m = values.iter().sum::<f64>() / values.len() as f64;
            let sd = (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / values.len() as f64).sqrt();
            assert!(
                (f64::from(mean) - m).abs() < 1e-4 && (f64::from(std) - sd).abs() < 1e-4,
                "{} column {c}",
                relation.name
            );
        }
    }

    let (with, without) = (read_records(&hubs), read_records(&plain));
    assert_eq!(with, without, "re-indexing and the worker count change nothing");
    assert!(with.len() > 500, "{} records", with.len());
    let mut relations_seen = BTreeSet::new();
    let mut reindexed_hub_seen = false;
    for r in &with {
        assert_eq!(r.label, Some(schemas::Label::Class(g.labels[&r.root])), "root {}", r.root);
        let expected = bfs(&g, ("user".into(), r.root), fanouts);
        let got = shape_of(r, &meta);
        assert_eq!(got, expected, "root {}", r.root);
        relations_seen.extend(got.1.iter().map(|e| e.2.clone()));
        reindexed_hub_seen |= got.0.iter().any(|n| n.2 > 20);
    }
    let all = ["buys", "follows", "returns", "rev_buys", "rev_returns", "sells"];
    assert_eq!(relations_seen, all.iter().map(|s| s.to_string()).collect(), "every relation in some record");
    assert!(reindexed_hub_seen, "no record held a re-indexed hub");

    // Typed records train R-GCN and heterogeneous GraphSAGE; another kind is refused by name.
    let train = run(&Job::train(&hubs, dir.join("model")).key("model", "gat").write(&dir, "train"), &[]);
    assert_fails(&train, 64, &["model = \"gat\"", "typed graph", "\"rgcn\" or \"sage\""]);
}

/// The signal test: on a generated typed graph, whose users' classes show only through the
/// relation of their items, R-GCN and heterogeneous GraphSAGE beat the same models with types
/// and relations erased (the generator's erased view: one id space, features zero-padded, every
/// edge both ways; with one relation and one type both models are GraphSAGE) by a clear margin.
/// Every relation is reversed in the typed job, so both sides see the same edges.
#[test]
fn typed_models_beat_the_same_models_with_relations_erased() {
    let dir = scratch("hetero-signal");
    let data = dir.join("graph");
    let args = ["generate", "--hetero", "--erased", "--out", data.to_str().unwrap(), "--nodes", "5000", "--seed", "2"];
    graphflat_ok(&args);
    let reversed = graph_text(&data, true);
    let flatten = |name: &str, graph: &str, keys: &str| {
        let out = dir.join(name);
        let text =
            format!("{graph}[flatten]\noutput = {:?}\nhops = 2\nfanouts = [10, 10]\n{keys}", out.display().to_string());
        run_ok(&write_job(&dir, name, &text), &[]);
        out
    };
    let typed = flatten("typed", &reversed, "target_type = \"user\"\n");
    let erased_data = data.join("erased");
    let erased = flatten(
        "erased",
        "",
        &format!("nodes = {:?}\nedges = {:?}\n", erased_data.join("nodes"), erased_data.join("edges")),
    );
    let train = |records: &Path, model: &str, name: &str| {
        let job = Job::train(records, dir.join(format!("model-{name}")))
            .key("model", model)
            .key("hidden", 32)
            .key("epochs", 10)
            .key("lr", 0.01)
            .key("batch_size", 128);
        test_accuracy(&run_ok(&job.write(&dir, &format!("train-{name}")), &[]))
    };
    let erased = train(&erased, "sage", "erased-sage");
    for model in ["rgcn", "sage"] {
        let accuracy = train(&typed, model, model);
        eprintln!("test accuracy: typed {model} {accuracy:.3}, erased sage {erased:.3}");
        assert!(accuracy > 0.85 && accuracy > erased + 0.3, "typed {model}: {accuracy}, erased: {erased}");
    }
}

#[test]
fn bad_typed_inputs_name_the_type_or_relation_file_row_and_column() {
    let dir = scratch("hetero-bad");
    let data = dir.join("graph");
    graphflat_ok(&["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "200", "--seed", "1"]);
    let job = |graph: String, flatten: &str| {
        format!(
            "{graph}[flatten]\noutput = {:?}\ntarget_type = \"user\"\n{flatten}",
            dir.join("out").display().to_string()
        )
    };
    let run_text = |name: &str, text: String| run(&write_job(&dir, name, &text), &[]);

    // An unknown type in a relation, and an unknown target type: usage errors before any read.
    let unknown = graph_tables(&data).replace("dst = \"item\"", "dst = \"product\"");
    assert_fails(&run_text("unknown-type", job(unknown, "")), 64, &["relation buys", "\"product\" is not a node type"]);
    let target = job(graph_tables(&data), "").replace("target_type = \"user\"", "target_type = \"item2\"");
    assert_fails(&run_text("unknown-target", target), 64, &["\"item2\" is not a node type"]);

    // A sells edge whose source is a user id no shop has: the relation, file, row and column.
    let shops = read_batches(&data.join("nodes/shop")).iter().map(|b| b.num_rows()).sum::<usize>();
    let bad_edges = dir.join("bad-sells");
    std::fs::create_dir_all(&bad_edges).unwrap();
    write_edges(&bad_edges.join("part-0.parquet"), &[(0, 1), (shops as i64 + 5, 2)]);
    let graph =
        graph_tables(&data).replace(&data.join("edges/sells").display().to_string(), &bad_edges.display().to_string());
    let out = run_text("missing-endpoint", job(graph, ""));
    assert_fails(&out, 65, &["relation sells (shop -> item)", "part-0.parquet", "row 1", "src", "unknown node"]);

    // A relation table with a split column: refused, not read as held-out edges to drop.
    let split_edges = dir.join("split-sells");
    write_split_edges(&split_edges.join("part-0.parquet"), &[(0, 1, "train"), (1, 2, "valid")]);
    let graph = graph_tables(&data)
        .replace(&data.join("edges/sells").display().to_string(), &split_edges.display().to_string());
    let out = run_text("split", job(graph, ""));
    assert_fails(&out, 65, &["relation sells (shop -> item)", "part-0.parquet", "split", "every edge passes messages"]);

    // A user row with another feature width: the type, the file, row and column.
    let users = dir.join("users");
    write_users(&users, &[(0, 4), (1, 4), (2, 3)], true);
    let graph =
        graph_tables(&data).replace(&data.join("nodes/user").display().to_string(), &users.display().to_string());
    let out = run_text("width", job(graph, ""));
    assert_fails(&out, 65, &["node type user", "row 2", "features", "feature length 3 differs"]);

    // A target type without labels.
    write_users(&users, &[(0, 4), (1, 4)], false);
    let graph =
        graph_tables(&data).replace(&data.join("nodes/user").display().to_string(), &users.display().to_string());
    assert_fails(&run_text("no-labels", job(graph, "")), 64, &["node type user is the target type", "no label column"]);
}

/// An `[infer]` job over the typed graph in `data` with `model`, into `out`, keys added.
fn infer_typed(dir: &Path, data: &Path, model: &Path, out: &Path, name: &str, keys: &str) -> PathBuf {
    let text = format!(
        "{}[infer]
target_type = \"user\"
model = {:?}
output = {:?}
{keys}",
        graph_tables(data),
        model.display().to_string(),
        out.display().to_string()
    );
    write_job(dir, name, &text)
}

/// Consistency: GraphInfer over the typed graph equals the trainer's forward pass on every
/// record (R-GCN with bases and standardized edge features, heterogeneous GraphSAGE with raw
/// ones; records with hubs re-indexed, a relation with its own fanouts, relations with edge
/// features of two widths and without), with hub aggregations split or not; every node of every
/// type gets a row, scored only for the target type; and the output is the same bits on one
/// worker, two workers and two processes.
#[test]
fn typed_inference_equals_the_trainer_forward_pass_on_every_record() {
    let dir = scratch("hetero-infer");
    let data = dir.join("graph");
    let generate = ["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "2000", "--seed", "4"];
    graphflat_ok(&[&generate[..], &["--edge-feature-dim", "4"]].concat());
    let flat = flatten_typed(&dir, &data, "flat", "hub_threshold = 20\n", &["--workers", "2"]);
    let g = read_typed(&data);
    let counts = |t: &str| g.features.keys().filter(|(u, _)| u == t).count();
    for (model, keys) in [("rgcn", "bases = 2\nnormalize_edge_features = true\n"), ("sage", "")] {
        let dir_model = dir.join(format!("model-{model}"));
        let text = format!(
            "[train]\nrecords = {:?}\noutput = {:?}\nmodel = {model:?}\nhidden = 8\nepochs = 2\nbatch_size = 256\n{keys}",
            flat.display().to_string(),
            dir_model.display().to_string()
        );
        run_ok(&write_job(&dir, &format!("train-{model}"), &text), &[]);
        let json = std::fs::read_to_string(model_file(&dir_model, ".json")).unwrap();
        let meta: schemas::model::ModelMeta = serde_json::from_str(&json).unwrap();
        let types = meta.spec.types.as_ref().unwrap();
        let widths: Vec<usize> = types.relations.iter().map(|r| r.edge_dim).collect();
        assert_eq!(widths, [4, 2, 0, 4, 0, 0], "{model} reads buys', follows' and rev_buys' edge features");
        assert_eq!(meta.spec.relation_edge_stats.len(), if model == "rgcn" { 6 } else { 0 });
        let expected = record_scores(&dir_model, &flat);
        let runs: Vec<_> = [4, 0]
            .into_iter()
            .map(|threshold| scores_equal_the_trainer(&dir, (&data, &dir_model), threshold, &expected, &counts))
            .collect();
        let embeddings =
            |s: &BTreeMap<Node, TypedScored>| -> Vec<f32> { s.values().flat_map(|r| r.0.clone()).collect() };
        let split =
            embeddings(&runs[0]).iter().zip(embeddings(&runs[1])).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(split < 1e-5, "{model}: embeddings with hubs split and not differ by {split}");
    }
    let model = dir.join("model-rgcn");
    let reference = the_same_bits_on_any_cluster(&dir, &data, &model);
    node_types_choose_the_rows(&dir, &data, &model, &reference, counts("item"));
    a_graph_that_is_not_the_models_is_refused(&dir, &data, &model);
}

/// GraphInfer's scores of `model` with hubs split past `threshold` (0: never): every node of
/// every type gets a row, the users' scores equal the trainer's (`expected`) to 1e-4, the other
/// types' rows are not scored.
fn scores_equal_the_trainer(
    dir: &Path,
    (data, model): (&Path, &Path),
    threshold: u64,
    expected: &BTreeMap<i64, Vec<f32>>,
    counts: &dyn Fn(&str) -> usize,
) -> BTreeMap<Node, TypedScored> {
    let name = model.file_name().unwrap().to_string_lossy().replace("model-", "");
    let out = dir.join(format!("scores-{name}-{threshold}"));
    let keys = format!("hub_threshold = {threshold}\n");
    let job = infer_typed(dir, data, model, &out, &format!("infer-{name}-{threshold}"), &keys);
    let stdout = run_ok(&job, &["--workers", "2"]);
    if threshold > 0 {
        assert!(!stdout.contains("hubs split per layer [0, 0]"), "no hub was split:\n{stdout}");
    }
    let scored = read_typed_scores(&out);
    for t in ["user", "item", "shop"] {
        let rows = scored.keys().filter(|(u, _)| u == t).count();
        assert_eq!(rows, counts(t), "{name}: rows of node type {t}");
    }
    let users: BTreeMap<i64, Vec<f32>> = scored
        .iter()
        .filter(|((t, _), _)| t == "user")
        .map(|((_, id), (_, _, scores))| (*id, scores.clone().expect("a user row is scored")))
        .collect();
    assert!(scored.iter().all(|((t, _), row)| t == "user" || (row.1.is_none() && row.2.is_none())));
    let difference = max_difference(&users, expected);
    assert!(difference < 1e-4, "{name}, hub threshold {threshold}: scores differ by {difference}");
    scored
}

/// Every row's embedding and prediction, as bits.
type Bits = Vec<(Node, Vec<u32>, Option<i64>)>;

fn bits(s: &BTreeMap<Node, TypedScored>) -> Bits {
    s.iter().map(|(n, r)| (n.clone(), r.0.iter().map(|v| v.to_bits()).collect(), r.1)).collect()
}

/// The keys of the cluster-shape runs: hubs split, small batches.
const SHAPE_KEYS: &str = "hub_threshold = 3\nbatch_size = 100\n";

/// The same bits on 1 worker, 2 workers and 2 processes, for every row of every type; returns
/// them.
fn the_same_bits_on_any_cluster(dir: &Path, data: &Path, model: &Path) -> Bits {
    let one = dir.join("scores-1");
    run_ok(&infer_typed(dir, data, model, &one, "infer-1", SHAPE_KEYS), &["--workers", "1"]);
    let two = dir.join("scores-2");
    run_ok(&infer_typed(dir, data, model, &two, "infer-2", SHAPE_KEYS), &["--workers", "2"]);
    let processes = dir.join("scores-2p");
    let cluster = Job::loopback(2).to_string();
    let job = infer_typed(dir, data, model, &processes, "infer-2p", SHAPE_KEYS);
    std::fs::write(&job, format!("{cluster}{}", std::fs::read_to_string(&job).unwrap())).unwrap();
    run_two_processes(&job, dir);
    let reference = bits(&read_typed_scores(&one));
    assert!(reference == bits(&read_typed_scores(&two)), "1 and 2 workers differ");
    assert!(reference == bits(&read_typed_scores(&processes)), "1 worker and 2 processes differ");
    reference
}

/// `node_types` chooses the types that get rows: items only, the same embeddings.
fn node_types_choose_the_rows(dir: &Path, data: &Path, model: &Path, reference: &Bits, items_count: usize) {
    let items = dir.join("scores-items");
    let keys = format!("{SHAPE_KEYS}node_types = [\"item\"]\n");
    run_ok(&infer_typed(dir, data, model, &items, "infer-items", &keys), &[]);
    let only = bits(&read_typed_scores(&items));
    assert_eq!(only.len(), items_count);
    assert!(only.iter().all(|(n, _, p)| n.0 == "item" && p.is_none()));
    let all_items: Vec<_> = reference.iter().filter(|(n, _, _)| n.0 == "item").cloned().collect();
    assert!(only == all_items, "item embeddings differ when only items get rows");
}

/// A job whose graph is not the model's: refused before anything is written.
fn a_graph_that_is_not_the_models_is_refused(dir: &Path, data: &Path, model: &Path) {
    let refused = |name: &str, text: String, code: i32, words: &[&str]| {
        let out = run(&write_job(dir, name, &text), &[]);
        assert_fails(&out, code, words);
        assert!(!dir.join(format!("{name}-out/_SUCCESS")).exists(), "{name}: an output was committed");
    };
    let job = |graph: String, infer: &str, name: &str| {
        let model = model.display().to_string();
        let out = dir.join(format!("{name}-out")).display().to_string();
        format!("{graph}[infer]\nmodel = {model:?}\noutput = {out:?}\n{infer}")
    };
    let plain = format!("nodes = {:?}\nedges = {:?}\n", data.join("nodes/user"), data.join("edges/follows"));
    refused("plain-job", job(String::new(), &plain, "plain-job"), 64, &["a model of a typed graph", "[graph]"]);
    let fewer = graph_tables(data).replace("[graph.relations.sells]", "[graph.relations.sold]");
    let text = job(fewer, "target_type = \"user\"\n", "relations");
    refused("relations", text, 64, &["the model's relations are", "sells (shop -> item)", "sold (shop -> item)"]);
    let text = job(graph_tables(data), "target_type = \"item\"\n", "target");
    refused("target", text, 64, &["the model scores node type user", "target_type is item"]);
    let users = dir.join("narrow-users");
    write_users(&users, &[(0, 4), (1, 4)], false);
    let graph =
        graph_tables(data).replace(&data.join("nodes/user").display().to_string(), &users.display().to_string());
    let text = job(graph, "target_type = \"user\"\n", "width");
    refused("width", text, 65, &["takes 32 input features for node type user", "has 4 per node"]);
    // The same graph without edge features: the model reads buys' (and follows').
    let bare = dir.join("bare");
    graphflat_ok(&["generate", "--hetero", "--out", bare.to_str().unwrap(), "--nodes", "2000", "--seed", "4"]);
    let buys = |d: &Path| d.join("edges/buys").display().to_string();
    let text = job(graph_tables(data).replace(&buys(data), &buys(&bare)), "target_type = \"user\"\n", "edge-width");
    let words = ["reads 4 edge features per edge of relation buys", "has no features column"];
    refused("edge-width", text, 65, &words);
}

/// Typed GraphInfer on the GPU (burn-wgpu; software Vulkan in CI) equals the CPU to 1e-4
/// (relative past 1), every row's embedding and the users' scores (relations with edge
/// features among them).
#[cfg(feature = "gpu")]
#[test]
fn typed_gpu_inference_equals_the_cpu() {
    let dir = scratch("hetero-infer-gpu");
    let data = dir.join("graph");
    let generate = ["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "1000", "--seed", "6"];
    graphflat_ok(&[&generate[..], &["--edge-feature-dim", "3"]].concat());
    let flat = flatten_typed(&dir, &data, "flat", "", &[]);
    let model = dir.join("model");
    let text = format!(
        "[train]\nrecords = {:?}\noutput = {:?}\nmodel = \"rgcn\"\nhidden = 8\nepochs = 1\n",
        flat.display().to_string(),
        model.display().to_string()
    );
    run_ok(&write_job(&dir, "train", &text), &[]);
    let mut runs = Vec::new();
    for device in ["cpu", "gpu"] {
        let out = dir.join(device);
        let keys = format!("device = {device:?}\nhub_threshold = 4\n");
        run_ok(&infer_typed(&dir, &data, &model, &out, device, &keys), &[]);
        runs.push(read_typed_scores(&out));
    }
    assert_eq!(runs[0].keys().collect::<Vec<_>>(), runs[1].keys().collect::<Vec<_>>());
    let mut difference = 0f32;
    for (a, b) in runs[0].values().zip(runs[1].values()) {
        let scores = a.2.iter().flatten().zip(b.2.iter().flatten());
        for (x, y) in a.0.iter().zip(&b.0).chain(scores) {
            difference = difference.max((x - y).abs() / y.abs().max(1.0));
        }
    }
    assert!(difference < 1e-4, "GPU rows differ from the CPU's by {difference} (relative past 1)");
}

/// An edge table at `path` with a `split` column: (src, dst, split) rows.
fn write_split_edges(path: &Path, rows: &[(i64, i64, &str)]) {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};

    let ids = |pick: fn(&(i64, i64, &str)) -> i64| Arc::new(Int64Array::from_iter_values(rows.iter().map(pick)));
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("src", ids(|r| r.0)),
        ("dst", ids(|r| r.1)),
        ("split", Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2)))),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// A user table at `dir/part-0.parquet`: (id, feature width) rows, labeled (class 0, train) or
/// without `label` and `split` columns.
fn write_users(dir: &Path, rows: &[(i64, usize)], labels: bool) {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Float32Array, Int64Array, ListArray, RecordBatch, StringArray};
    use arrow_buffer::OffsetBuffer;
    use arrow_schema::{DataType, Field};

    let values: Vec<f32> = rows.iter().flat_map(|&(_, w)| vec![0.5f32; w]).collect();
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let offsets = OffsetBuffer::from_lengths(rows.iter().map(|r| r.1));
    let features = ListArray::new(item, offsets, Arc::new(Float32Array::from(values)), None);
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("node_id", Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)))),
        ("features", Arc::new(features)),
    ];
    if labels {
        columns.push(("label", Arc::new(Int64Array::from(vec![0; rows.len()]))));
        columns.push(("split", Arc::new(StringArray::from(vec!["train"; rows.len()]))));
    }
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    std::fs::remove_dir_all(dir).ok();
    std::fs::create_dir_all(dir).unwrap();
    let file = std::fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}
