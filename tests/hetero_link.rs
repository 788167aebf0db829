//! Link prediction on a typed graph, end to end (`split-edges` on one relation's table, a link
//! `[flatten]` naming that relation, a typed link model, `[infer]` with candidate pairs): each
//! link record's endpoints are the independent typed BFS of their typed nodes (the user source,
//! the item destination and item negatives), training edges held out of their own records;
//! the records are the same on one and two workers; GraphInfer's embedding of every endpoint
//! and its pair scores equal the trainer's forward pass; and a link relation without a split
//! or a pair naming a node its type lacks is an error naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::typed::*;
use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use burn::prelude::*;
use gnn::decoder::PairScorer;
use schemas::Split;

/// A link `[flatten]` of buys over the typed graph in `data` into `out`, with `keys` added.
fn link_flatten(data: &Path, out: &Path, keys: &str) -> String {
    format!(
        "{}[flatten]\noutput = {:?}\ntask = \"link\"\nlink_relation = \"buys\"\nnegatives = 2\nhops = 2\n\
         fanouts = {FANOUTS:?}\nseed = {SEED}\n{keys}",
        graph_tables(data),
        out.display().to_string()
    )
}

/// The buys table's split of each (user, item) pair (parallel edges share theirs), and its rows.
fn buys_splits(data: &Path) -> (BTreeMap<(i64, i64), Split>, usize) {
    let (mut out, mut rows) = (BTreeMap::new(), 0);
    for batch in read_batches(&data.join("edges/buys")) {
        let (src, dst) = (batch.column_by_name("src").unwrap(), batch.column_by_name("dst").unwrap());
        let split = batch.column_by_name("split").unwrap().as_string::<i32>();
        for i in 0..batch.num_rows() {
            let pair = (src.as_primitive::<Int64Type>().value(i), dst.as_primitive::<Int64Type>().value(i));
            let previous = out.insert(pair, Split::parse(split.value(i)).unwrap());
            assert!(previous.is_none_or(|p| Some(p) == out.get(&pair).copied()), "{pair:?}: two splits");
            rows += 1;
        }
    }
    (out, rows)
}

#[test]
fn typed_link_records_hold_each_endpoints_typed_neighborhood() {
    let dir = scratch("hetero-link-records");
    let data = split_typed(&dir);
    let g = read_typed(&data);
    let fanouts = |r: &str| if r.ends_with("returns") { RETURNS_FANOUTS } else { FANOUTS };
    let two = dir.join("two");
    let keys = "disjoint_train = true\nhub_threshold = 20\n";
    run_ok(&write_job(&dir, "two", &link_flatten(&data, &two, keys)), &["--workers", "2"]);
    let one = dir.join("one");
    run_ok(&write_job(&dir, "one", &link_flatten(&data, &one, "disjoint_train = true\nhub_threshold = 0\n")), &[]);
    let links = read_links(&two);
    assert!(links == read_links(&one), "the records differ on 1 and 2 workers (re-indexing on and off)");

    let meta = meta_of(&two);
    let (types, link) = (meta.types.as_ref().unwrap(), meta.link.as_ref().unwrap());
    assert_eq!(types.relations[usize::from(link.relation.unwrap())].name, "buys");
    assert_eq!(types.target_name(), "user", "the link relation's source type");
    let (splits, rows) = buys_splits(&data);
    assert_eq!(links.len(), rows, "a record per buys row (each has a split)");
    let mut held_out = 0;
    for l in &links {
        assert_eq!(l.split, Some(splits[&(l.src, l.dst)]), "({}, {})", l.src, l.dst);
        assert_eq!(l.negatives.len(), 2);
        let (src, dst) = (("user".to_owned(), l.src), ("item".to_owned(), l.dst));
        let negatives = l.negatives.iter().map(|&n| ("item".to_owned(), n));
        let ends: Vec<Node> = [src.clone(), dst.clone()].into_iter().chain(negatives).collect();
        for (e, (end, record)) in ends.iter().zip(&l.endpoints).enumerate() {
            assert!(g.features.contains_key(end), "endpoint {e} {end:?} is not a node of its type");
            let (nodes, mut edges) = bfs(&g, end.clone(), fanouts);
            // A training edge's record holds out every edge between its two ends.
            if l.split == Some(Split::Train) {
                let before = edges.len();
                edges.retain(|(d, s, ..)| {
                    let pair = BTreeSet::from([d, s]);
                    pair != BTreeSet::from([&src, &dst])
                });
                held_out += before - edges.len();
            }
            assert_eq!(shape_of(record, &meta), (nodes, edges), "({}, {}) endpoint {e}", l.src, l.dst);
        }
    }
    assert!(held_out > 0, "no training record held an edge out");
}

/// GraphInfer's typed link output by (type, id): the embeddings, with no node head.
fn read_typed_embeddings(dir: &Path) -> BTreeMap<Node, Vec<f32>> {
    let mut out = BTreeMap::new();
    for batch in read_batches(dir) {
        assert!(batch.column_by_name("scores").is_none() && batch.column_by_name("prediction").is_none());
        let types = batch.column_by_name("node_type").unwrap().as_string::<i32>();
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let embedding = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        for r in 0..batch.num_rows() {
            let row = embedding.value(r).as_primitive::<Float32Type>().values().to_vec();
            out.insert((types.value(r).to_owned(), ids.value(r)), row);
        }
    }
    out
}

/// A pairs table of (user, item) rows at `dir/part-0.parquet`.
fn write_pairs(dir: &Path, pairs: &[(i64, i64)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let column =
        |pick: fn(&(i64, i64)) -> i64| Arc::new(Int64Array::from_iter_values(pairs.iter().map(pick))) as ArrayRef;
    let batch = RecordBatch::try_from_iter([("src", column(|p| p.0)), ("dst", column(|p| p.1))]).unwrap();
    let file = std::fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    dir.to_path_buf()
}

/// An `[infer]` job of `model` over the typed graph in `data`, scoring `pairs` into `out`.
fn infer_link(data: &Path, model: &Path, pairs: &Path, out: &Path) -> String {
    let path = |p: &Path| p.display().to_string();
    format!(
        "{}[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\npairs = {:?}\npairs_output = {:?}\nhub_threshold = 4\n",
        graph_tables(data),
        path(model),
        path(&out.join("embeddings")),
        path(pairs),
        path(&out.join("pairs"))
    )
}

#[test]
fn typed_link_models_embed_and_score_as_the_trainer_does() {
    let dir = scratch("hetero-link-models");
    let data = split_typed(&dir);
    let flat = dir.join("flat");
    run_ok(&write_job(&dir, "flatten", &link_flatten(&data, &flat, "hub_threshold = 20\n")), &["--workers", "2"]);
    let links = read_links(&flat);
    for (kind, keys) in [("rgcn", "bases = 2\nnormalize_edge_features = true\ndecoder = \"mlp\"\n"), ("sage", "")] {
        let model = dir.join(format!("model-{kind}"));
        let text = format!(
            "[train]\nrecords = {:?}\noutput = {:?}\nmodel = {kind:?}\nhidden = 8\nembedding_dim = 6\nepochs = 3\n\
             batch_size = 128\ndropout = 0.0\n{keys}",
            flat.display().to_string(),
            model.display().to_string()
        );
        run_ok(&write_job(&dir, &format!("train-{kind}"), &text), &["--workers", "2"]);
        let json: schemas::model::ModelMeta =
            serde_json::from_str(&std::fs::read_to_string(model_file(&model, ".json")).unwrap()).unwrap();
        let relation = &json.spec.types.as_ref().unwrap().relations[usize::from(json.link_relation.unwrap())];
        assert_eq!(relation.name, "buys", "{kind}: model.json names its link relation");
        let metrics = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
        let last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
        let auc = last["valid_auc"].as_f64().unwrap();
        assert!(auc > 0.6, "{kind}: validation AUC {auc}");

        // Candidates: every record's positive and negatives, and some pairs no record holds.
        let mut candidates: Vec<(i64, i64)> = links
            .iter()
            .flat_map(|l| std::iter::once(l.dst).chain(l.negatives.clone()).map(move |d| (l.src, d)))
            .collect();
        candidates.extend((0..50).map(|i| (i * 7 % 900, i * 13 % 450)));
        let pairs = write_pairs(&dir.join(format!("pairs-{kind}")), &candidates);
        let (one, two) = (dir.join(format!("infer-{kind}-1")), dir.join(format!("infer-{kind}-2")));
        run_ok(&write_job(&dir, &format!("infer-{kind}-1"), &infer_link(&data, &model, &pairs, &one)), &[]);
        run_ok(
            &write_job(&dir, &format!("infer-{kind}-2"), &infer_link(&data, &model, &pairs, &two)),
            &["--workers", "2"],
        );
        let embeddings = read_typed_embeddings(&one.join("embeddings"));
        assert!(embeddings == read_typed_embeddings(&two.join("embeddings")), "{kind}: 1 and 2 workers differ");
        assert!(embeddings.keys().any(|n| n.0 == "shop"), "{kind}: every type gets a row");

        let scorer = the_trainer_embeds_and_scores_alike(&model, &flat, links.len(), &embeddings);
        every_pair_is_scored(kind, &one.join("pairs"), (&embeddings, &scorer), candidates.len());

        // A refresh of nothing changed: every node's last layer read back from the rows (by
        // type name and id), every pair scored again from them, the same.
        let again = dir.join(format!("infer-{kind}-again"));
        let job = write_job(
            &dir,
            &format!("again-{kind}"),
            &(infer_link(&data, &model, &pairs, &again)
                + "incremental = true
"),
        );
        run_ok(&job, &[]);
        let line = crate::refresh::refresh_line(&run_ok(&job, &["--workers", "2"]));
        assert!(line.starts_with("refresh: incremental") && line.contains(": 0 nodes changed"), "{kind}: {line}");
        let pairs_of = |out: &Path| sorted_rows(&read_batches(&out.join("pairs")));
        assert!(pairs_of(&again) == pairs_of(&one), "{kind}: a refresh's pairs differ from a full run's");
    }
}

/// Each endpoint's embedding and each record's scores (the trainer's forward pass over the
/// records) equal GraphInfer's `embeddings` to 1e-4; returns the model's pair scorer.
fn the_trainer_embeds_and_scores_alike(
    model: &Path,
    flat: &Path,
    records: usize,
    embeddings: &BTreeMap<Node, Vec<f32>>,
) -> PairScorer {
    let kind = model.file_name().unwrap().to_string_lossy().replace("model-", "");
    let device = Device::flex();
    let forward =
        graphtrainer::forward_link_records(&local_io(), model.to_str().unwrap(), flat.to_str().unwrap()).unwrap();
    assert_eq!(forward.len(), records);
    let (loaded, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &device).unwrap();
    let scorer = PairScorer::of(&loaded.spec, gnn.decoder.as_ref());
    let (mut worst, mut worst_score) = (0f32, 0f32);
    let gap = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
    for f in &forward {
        for (e, (id, h)) in f.embeddings.iter().enumerate() {
            let node = (if e == 0 { "user" } else { "item" }.to_owned(), *id);
            worst = worst.max(gap(h, &embeddings[&node]));
        }
        let user = &embeddings[&("user".to_owned(), f.src)];
        let destinations = std::iter::once(f.dst).chain(f.negatives.iter().copied());
        for (d, &score) in destinations.zip(&f.scores) {
            let ours = scorer.score(user, &embeddings[&("item".to_owned(), d)]);
            worst_score = worst_score.max((ours - score).abs() / score.abs().max(1.0));
        }
    }
    assert!(worst < 1e-4, "{kind}: an embedding differs from the trainer's by {worst}");
    assert!(worst_score < 1e-4, "{kind}: a record's score differs from the trainer's by {worst_score}");
    scorer
}

/// Every candidate pair (`count`) is scored from the user's and the item's embeddings.
fn every_pair_is_scored(
    kind: &str,
    pairs: &Path,
    (embeddings, scorer): (&BTreeMap<Node, Vec<f32>>, &PairScorer),
    count: usize,
) {
    let mut scored = 0;
    for batch in read_batches(pairs) {
        let column = |name: &str| batch.column_by_name(name).unwrap().as_primitive::<Int64Type>().values().to_vec();
        let (src, dst) = (column("src"), column("dst"));
        let score = batch.column_by_name("score").unwrap().as_primitive::<Float32Type>();
        for i in 0..batch.num_rows() {
            let user = &embeddings[&("user".to_owned(), src[i])];
            let expected = scorer.score(user, &embeddings[&("item".to_owned(), dst[i])]);
            assert!((score.value(i) - expected).abs() <= 1e-5 * expected.abs().max(1.0), "{kind}: pair {i}");
            scored += 1;
        }
    }
    assert_eq!(scored, count, "{kind}: one row per candidate");
}

#[test]
fn a_link_relation_without_a_split_and_pairs_of_the_wrong_type_are_named() {
    let dir = scratch("hetero-link-bad");
    let data = split_typed(&dir);
    // The generated buys table has no split: no supervision edges.
    let bare = graph_tables(&data).replace(
        &data.join("edges/buys").display().to_string(),
        &dir.join("generated/edges/buys").display().to_string(),
    );
    let text = link_flatten(&data, &dir.join("bare"), "").replacen(&graph_tables(&data), &bare, 1);
    let out = run(&write_job(&dir, "bare", &text), &[]);
    assert_fails(&out, 65, &["relation buys", "no edge has a split"]);

    // A model of it, and pairs naming an item id no item has (a user id is no item id).
    let flat = dir.join("flat");
    run_ok(&write_job(&dir, "flatten", &link_flatten(&data, &flat, "")), &[]);
    let model = dir.join("model");
    let train = Job::train(&flat, &model).key("model", "rgcn").key("hidden", 4).key("epochs", 1);
    run_ok(&train.write(&dir, "train"), &[]);
    let items = read_typed(&data).features.keys().filter(|n| n.0 == "item").count() as i64;
    let pairs = write_pairs(&dir.join("pairs"), &[(0, 1), (1, items + 7)]);
    let out = run(&write_job(&dir, "infer", &infer_link(&data, &model, &pairs, &dir.join("scores"))), &[]);
    assert_fails(&out, 65, &["part-0.parquet", "row 1", "dst", &format!("unknown item {}", items + 7)]);
    assert!(!dir.join("scores/embeddings/_SUCCESS").exists() && !dir.join("scores/pairs/_SUCCESS").exists());
}
