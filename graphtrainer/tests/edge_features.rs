//! Training on records with edge features: a task only the edge features can solve (a node's
//! class is the majority sign of its in-edges' first feature), learned by the kinds whose
//! messages carry them (GraphSAGE, GINE; GAT's only weigh its neighbors' noise) and not without
//! them; what `model.json` records; GCN leaving them out; and the usage errors of asking for
//! edge features or statistics the records do not have.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cluster::Failure;
use graphtrainer::Error;
use graphtrainer::train::TrainConfig;
use schemas::edge_stats::EdgeSums;
use schemas::model::{ModelKind, ModelMeta};
use schemas::record::{FlattenMeta, record_schema, to_batch};
use schemas::{Cause, ClusterConfig, Label, LabelKind, Record, Sampler, Split, StorageConfig};
use tables::Io;
use tables::commit::Stage;
use tables::table::TableWriter;

const NODES: usize = 240;
const DIM: usize = 4;
const EDGE_DIM: usize = 2;
const IN_DEGREE: usize = 3;

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graphtrainer-edge-features").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One-hop records of a random graph: each node has [`IN_DEGREE`] in-edges from distinct other
/// nodes; an edge's features are a sign `s` (plus noise) and an uninformative column of large
/// mean and scale; a node's class is 1 when most of its in-edges have `s > 0`. Node features
/// are noise. With `edge_features` false the records carry none.
fn records(edge_features: bool) -> (Vec<Record>, Option<EdgeSums>) {
    let mut s = gnn::rng::Stream::new(&[2024]);
    let mut sums = EdgeSums::new(EDGE_DIM);
    let records = (0..NODES)
        .map(|v| {
            let mut sources: Vec<usize> = Vec::new();
            while sources.len() < IN_DEGREE {
                let u = (s.next_u64() % NODES as u64) as usize;
                if u != v && !sources.contains(&u) {
                    sources.push(u);
                }
            }
            sources.sort_unstable();
            let signs: Vec<f32> = (0..IN_DEGREE).map(|_| if s.unit() < 0.5 { -1.0 } else { 1.0 }).collect();
            let mut features = Vec::new();
            for sign in &signs {
                let row = [sign + 0.3 * (s.unit() - 0.5), 3.0 + 10.0 * (s.unit() - 0.5)];
                sums.add_row(&row);
                features.extend(row);
            }
            let split = match v % 5 {
                0 => Split::Valid,
                1 => Split::Test,
                _ => Split::Train,
            };
            let class = i64::from(signs.iter().sum::<f32>() > 0.0);
            Record {
                root: v as i64,
                node_ids: std::iter::once(v).chain(sources.iter().copied()).map(|n| n as i64).collect(),
                label: Some(Label::Class(class)),
                split: Some(split),
                hops: std::iter::once(0).chain(std::iter::repeat_n(1, IN_DEGREE)).collect(),
                in_degrees: vec![IN_DEGREE as i64; IN_DEGREE + 1],
                features: (0..(IN_DEGREE + 1) * DIM).map(|_| s.unit() - 0.5).collect(),
                edge_src: (1..=IN_DEGREE as i32).collect(),
                edge_dst: vec![0; IN_DEGREE],
                edge_weights: vec![1.0; IN_DEGREE],
                edge_layers: vec![1; IN_DEGREE],
                edge_features: if edge_features { features } else { Vec::new() },
                ..Record::default()
            }
        })
        .collect();
    (records, edge_features.then_some(sums))
}

/// Writes the records as a finished record set in `dir`; `with_stats` false leaves the edge
/// statistics out of its metadata.
fn write_set(io: &Io, dir: &Path, edge_features: bool, with_stats: bool) -> String {
    let (records, sums) = records(edge_features);
    let meta = FlattenMeta {
        hops: 1,
        fanouts: Vec::new(),
        sampler: Sampler::All,
        seed: 0,
        feature_dim: DIM,
        label: LabelKind::Class,
        edge_dim: if edge_features { EDGE_DIM } else { 0 },
        edge_stats: sums.filter(|_| with_stats).map(|s| s.stats()),
        relation_edge_stats: Vec::new(),
        types: None,
        relation_fanouts: Vec::new(),
        string_ids: false,
        precomputed: None,
        root_neighbors: false,
        link: None,
    };
    let schema = Arc::new(record_schema(&meta));
    let place = io.place(dir.to_str().unwrap()).unwrap();
    let writer = TableWriter::start(io, &place, Stage::Flatten, &[], true).unwrap();
    writer.write(0, schema.clone(), &[to_batch(&records, &schema).unwrap()]).unwrap();
    writer.commit().unwrap();
    dir.to_str().unwrap().to_owned()
}

fn job(records: &str, output: &Path, model: ModelKind) -> TrainConfig {
    TrainConfig {
        records: records.to_owned(),
        output: output.to_str().unwrap().to_owned(),
        model,
        hidden: 16,
        heads: 2,
        dropout: 0.0,
        epochs: 60,
        batch_size: 64,
        lr: 0.02,
        weight_decay: Some(0.0),
        prefetch: 0,
        ..TrainConfig::default()
    }
}

fn train(io: &Arc<Io>, config: &TrainConfig, workers: usize) -> Result<graphtrainer::TrainSummary, Failure<Error>> {
    graphtrainer::run(io, config, &ClusterConfig { workers, ..ClusterConfig::default() })
}

fn model_meta(output: &Path) -> ModelMeta {
    committed_model(output).meta
}

/// The committed model in `output`, read (and checked) as GraphInfer reads it.
fn committed_model(output: &Path) -> gnn::io::ModelFiles {
    let io = Io::new(&Default::default()).unwrap();
    gnn::io::ModelFiles::open(&io, output.to_str().unwrap()).unwrap()
}

#[test]
fn edge_messages_learn_from_edge_features_and_model_json_records_them() {
    let dir = scratch("learn");
    let io = Io::new(&StorageConfig::default()).unwrap();
    let set = write_set(&io, &dir.join("records"), true, true);
    for kind in [ModelKind::Sage, ModelKind::Gat, ModelKind::Gine] {
        let output = dir.join(kind.name());
        let config = TrainConfig { normalize_edge_features: true, ..job(&set, &output, kind) };
        let summary = train(&io, &config, 1).unwrap();
        eprintln!("{kind:?} with edge features: test accuracy {:.3}", summary.test_at_best);
        if kind != ModelKind::Gat {
            assert!(summary.test_at_best > 0.9, "{kind:?}: test accuracy {} with edge features", summary.test_at_best);
        }
        let spec = model_meta(&output).spec;
        assert_eq!((spec.edge_dim, spec.normalize_edge_features), (EDGE_DIM, true), "{kind:?}");
        assert_eq!(spec.edge_stats.map(|s| s.dim()), Some(EDGE_DIM), "{kind:?}: model.json keeps the statistics");
    }
    // The same task without the edge features is a guess.
    let output = dir.join("sage-without");
    let config = TrainConfig { edge_features: Some(false), ..job(&set, &output, ModelKind::Sage) };
    let summary = train(&io, &config, 1).unwrap();
    eprintln!("Sage without edge features: test accuracy {:.3}", summary.test_at_best);
    assert!(summary.test_at_best < 0.75, "without edge features: test accuracy {}", summary.test_at_best);
    let spec = model_meta(&output).spec;
    assert_eq!((spec.edge_dim, spec.edge_stats), (0, None));
}

#[test]
fn gcn_leaves_the_edge_features_out() {
    let dir = scratch("gcn");
    let io = Io::new(&StorageConfig::default()).unwrap();
    let set = write_set(&io, &dir.join("records"), true, true);
    let output = dir.join("model");
    let config = TrainConfig { epochs: 2, normalize_edge_features: true, ..job(&set, &output, ModelKind::Gcn) };
    train(&io, &config, 1).unwrap();
    let spec = model_meta(&output).spec;
    assert_eq!((spec.edge_dim, spec.normalize_edge_features, spec.edge_stats), (0, false, None));
}

#[test]
fn two_workers_train_an_edge_model_to_the_same_bytes_every_run() {
    let dir = scratch("workers");
    let io = Io::new(&StorageConfig::default()).unwrap();
    let set = write_set(&io, &dir.join("records"), true, true);
    let weights: Vec<Vec<u8>> = ["a", "b"]
        .into_iter()
        .map(|run| {
            let output = dir.join(run);
            let config = TrainConfig { epochs: 20, ..job(&set, &output, ModelKind::Gine) };
            let summary = train(&io, &config, 2).unwrap();
            assert!(summary.params.iter().all(|p| p.is_finite()));
            committed_model(&output).weights().to_vec()
        })
        .collect();
    assert_eq!(weights[0], weights[1], "model.bpk differs between two runs of one job");
}

/// The job's failure as a usage error; its message.
fn usage_error(result: Result<graphtrainer::TrainSummary, Failure<Error>>) -> String {
    match result {
        Err(Failure::Worker(e)) => {
            assert_eq!(e.cause(), Cause::Usage, "{e}");
            assert_eq!(e.cause().exit_code(), 64);
            e.to_string()
        }
        Err(other) => panic!("not a worker's error: {other}"),
        Ok(_) => panic!("the job ran"),
    }
}

#[test]
fn edge_features_or_statistics_the_records_lack_are_usage_errors() {
    let dir = scratch("usage");
    let io = Io::new(&StorageConfig::default()).unwrap();
    let without = write_set(&io, &dir.join("plain"), false, false);
    let config = TrainConfig { edge_features: Some(true), ..job(&without, &dir.join("a"), ModelKind::Sage) };
    let message = usage_error(train(&io, &config, 1));
    assert!(message.contains("[train] edge_features") && message.contains("no edge features"), "{message}");

    let no_stats = write_set(&io, &dir.join("no-stats"), true, false);
    let config = TrainConfig { normalize_edge_features: true, ..job(&no_stats, &dir.join("b"), ModelKind::Gat) };
    let message = usage_error(train(&io, &config, 1));
    assert!(message.contains("[train] normalize_edge_features"), "{message}");
}
