//! GraphTrainer end to end: on real Cora (GCN, the Kipf & Welling settings), against an MLP on
//! a generated graph, sync data parallelism against one worker on the combined batches, and
//! resume against an uninterrupted run.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use graphtrainer::plan::Plan;
use graphtrainer::reader::{Pass, RecordSet, Unit};
use graphtrainer::stream::{Order, RecordStream, Source};
use graphtrainer::train::{Feed, TrainConfig, train_fed};

/// The trainer's settings from a `[train]` job.
fn train_config(job: Job) -> TrainConfig {
    job.keys_of("train").try_into().unwrap()
}

/// The last epoch's test accuracy from `metrics.jsonl`.
fn final_test_accuracy(model: &Path) -> f64 {
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["test_accuracy"].as_f64().unwrap()
}

#[test]
fn gcn_on_cora_reaches_the_papers_accuracy() {
    let Some(cora) = cora() else { return };
    let dir = scratch("train-cora");
    let data = dir.join("cora");
    graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", data.to_str().unwrap()]);
    let (flat, model) = (dir.join("flat"), dir.join("model"));
    let train = Job::train(&flat, &model).key("model", "gcn").key("hidden", 16).key("dropout", 0.5).key("lr", 0.01);
    let train =
        train.key("weight_decay", 5e-4).key("epochs", 200).key("normalize_features", true).key("cache_mb", 2048);
    let job = Job::flatten(&data, &flat).key("hops", 2).key("sampler", "all").and(train);
    let out = run_ok(&job.write(&dir, "job"), &["--workers", "2"]);
    let accuracy = final_test_accuracy(&model);
    eprintln!("Cora GCN test accuracy after 200 epochs: {accuracy:.4}\n{out}");
    assert!(accuracy >= 0.79, "test accuracy {accuracy}");
    assert!(model_file(&model, ".bpk").exists() && model_file(&model, ".json").exists());
}

#[test]
fn gcn_beats_the_same_model_without_edges() {
    let dir = scratch("train-vs-mlp");
    let data = dir.join("graph");
    generate(&data, 3000, 10, 16, 5);
    // The same nodes with one edge left: records of single nodes, so the GCN is an MLP.
    let lonely = dir.join("lonely");
    std::fs::create_dir_all(lonely.join("edges")).unwrap();
    let status = std::process::Command::new("cp")
        .args(["-r", data.join("nodes").to_str().unwrap(), lonely.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    write_single_edge(&lonely.join("edges/part-0.parquet"));
    std::fs::write(lonely.join("edges/_SUCCESS"), "").unwrap();

    let mut accuracy = Vec::new();
    for (name, graph) in [("gnn", &data), ("mlp", &lonely)] {
        let (flat, model) = (dir.join(format!("{name}-flat")), dir.join(format!("{name}-model")));
        let job = Job::flatten(graph, &flat).key("hops", 2).key("fanouts", vec![10, 10]);
        let job = job.and(Job::train(&flat, &model).key("epochs", 60).key("batch_size", 256).key("hidden", 32));
        run_ok(&job.write(&dir, name), &["--workers", "2"]);
        accuracy.push(final_test_accuracy(&model));
    }
    eprintln!("generated graph: GCN {:.3}, without edges {:.3}", accuracy[0], accuracy[1]);
    assert!(accuracy[0] > accuracy[1] + 0.05, "GCN {} vs MLP {}", accuracy[0], accuracy[1]);
}

/// Evaluation batches kept between epochs (a large `cache_mb`) and rebuilt every epoch
/// (`cache_mb = 0`) give the same metrics and the same model, on two workers.
#[test]
fn kept_evaluation_batches_change_only_the_time() {
    let dir = scratch("train-eval-cache");
    let data = dir.join("graph");
    generate(&data, 2000, 8, 8, 3);
    let flat = flatten(&dir, &data, "flat", &["--workers", "1"], |job| job.key("hops", 2).key("fanouts", vec![5, 5]));
    let mut runs = Vec::new();
    for cache_mb in [0, 1024] {
        let model = dir.join(format!("model-{cache_mb}"));
        let job = Job::train(&flat, &model).key("epochs", 3).key("batch_size", 128).key("cache_mb", cache_mb);
        let out = run(&job.write(&dir, &format!("train-{cache_mb}")), &["--workers", "2"]);
        let log = text(&out);
        assert!(out.status.success(), "{log}");
        let kept = log.matches("keeps its").count();
        assert_eq!(kept, if cache_mb == 0 { 0 } else { 2 }, "cache_mb = {cache_mb}: {log}");
        let read = |file: &str| std::fs::read(committed(&model, file)).unwrap();
        runs.push((read("metrics.jsonl"), read("model.bpk")));
    }
    assert!(runs[0].0 == runs[1].0, "metrics differ with kept evaluation batches");
    assert!(runs[0].1 == runs[1].1, "models differ with kept evaluation batches");
}

fn write_single_edge(path: &Path) {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    let batch = RecordBatch::try_from_iter([
        ("src", std::sync::Arc::new(Int64Array::from(vec![0i64])) as ArrayRef),
        ("dst", std::sync::Arc::new(Int64Array::from(vec![1i64])) as ArrayRef),
    ])
    .unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Records flattened by two workers: two part files, one per trainer worker.
fn two_part_records(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("graph");
    generate(&data, 600, 6, 8, 2);
    let flat = flatten(dir, &data, "flat", &["--workers", "2"], |job| job.key("hops", 2).key("fanouts", vec![4, 3]));
    assert_eq!(parquet_files(&flat).len(), 2);
    flat
}

/// Per epoch, per step, the records of that step's batch.
type Schedule = Arc<Vec<Vec<Vec<Record>>>>;

fn train_on(workers: usize, config: TrainConfig, set: Arc<RecordSet>, fixed: Option<(Schedule, usize)>) -> Vec<f32> {
    let guards = timely::execute(timely::Config::process(workers), move |worker| {
        let source = Arc::new(Source::new(set.clone(), 1 << 30));
        let feed = fixed.clone();
        let lookup = move |epoch: usize, step: usize| feed.as_ref().and_then(|(b, _)| b.get(epoch)?.get(step).cloned());
        let steps = fixed.as_ref().map(|(_, s)| *s);
        let feed_arg = steps.map_or(Feed::Share, |s| Feed::Given(&lookup, s));
        train_fed(worker, &config, &source, feed_arg).map(|s| s.params).map_err(|e| e.to_string())
    })
    .unwrap();
    guards.join().into_iter().next().unwrap().unwrap().unwrap()
}

/// The plan of `set` for `peers` workers, counted on one thread.
fn plan_of(set: &RecordSet, peers: usize) -> Plan {
    let units = set.units();
    let counts = units.iter().map(|&u| set.count(u, None).unwrap()).collect();
    Plan::new(units, counts, peers)
}

/// The records worker `w` streams in `epoch` (default shuffle buffer), and `(0..)` budget.
fn stream(set: &Arc<RecordSet>, plan: &Plan, w: usize, order: Order, shuffle_bytes: u64, cache: u64) -> Vec<Record> {
    let units = plan.units_of(w, Pass::Train);
    let source = Arc::new(Source::new(set.clone(), cache));
    RecordStream::train(source, &units, order, shuffle_bytes).collect::<Result<_, _>>().unwrap()
}

/// Worker `w`'s batches in `epoch`, as the trainer makes them by default.
fn epoch_batches(
    set: &Arc<RecordSet>,
    plan: &Plan,
    w: usize,
    epoch: usize,
    seed: u64,
    batch_size: usize,
) -> Vec<Vec<Record>> {
    let records = stream(set, plan, w, Order { seed, epoch, worker: w }, 64 << 20, 0);
    records.chunks(batch_size).map(<[Record]>::to_vec).collect()
}

/// The units of `set` that hold training records, in unit order.
fn train_units(set: &RecordSet) -> Vec<Unit> {
    set.units().into_iter().filter(|&u| set.count(u, None).unwrap().train > 0).collect()
}

/// Records flattened by four workers: four part files, each with one row group of training
/// records (and one each of valid and test records).
fn four_unit_records(dir: &Path) -> (std::path::PathBuf, Arc<RecordSet>) {
    let data = dir.join("graph");
    generate(&data, 800, 6, 4, 2);
    let flat = flatten(dir, &data, "flat", &["--workers", "4"], |job| job.key("hops", 1).key("fanouts", vec![3]));
    let set = Arc::new(RecordSet::open(local_io(), flat.to_str().unwrap()).unwrap());
    (flat, set)
}

#[test]
fn every_worker_streams_its_share_once_per_epoch_in_a_seeded_order() {
    let dir = scratch("train-stream");
    let (_, set) = four_unit_records(&dir);
    // The independent answer: every labeled training root, read unit by unit.
    let mut all: Vec<i64> =
        set.units().iter().flat_map(|&u| set.read(u, Pass::Train).unwrap()).map(|r| r.root).collect();
    all.sort_unstable();
    let train = train_units(&set);
    assert!(all.len() > 100 && train.len() == 4, "{} records in {} units", all.len(), train.len());
    let roots = |records: Vec<Record>| records.into_iter().map(|r| r.root).collect::<Vec<i64>>();
    for peers in 1..=3 {
        let plan = plan_of(&set, peers);
        let mut union = Vec::new();
        for w in 0..peers {
            let got = roots(stream(&set, &plan, w, Order { seed: 9, epoch: 0, worker: w }, 1 << 20, 0));
            assert_eq!(got.len() as u64, plan.share_totals(w).train, "{peers} workers, worker {w}");
            union.extend(got);
        }
        union.sort_unstable();
        assert_eq!(union, all, "{peers} workers");
    }
    let plan = plan_of(&set, 1);
    let order = |epoch| Order { seed: 9, epoch, worker: 0 };
    let first = roots(stream(&set, &plan, 0, order(1), 1 << 20, 0));
    // The cache changes nothing but memory; the epoch changes the order.
    assert_eq!(first, roots(stream(&set, &plan, 0, order(1), 1 << 20, u64::MAX)));
    assert_ne!(first, roots(stream(&set, &plan, 0, order(2), 1 << 20, 0)));
    // Without a buffer, each unit's records come out together, in row order; with one, the
    // units mix.
    let unit_of: std::collections::HashMap<i64, (usize, usize)> = train
        .iter()
        .enumerate()
        .flat_map(|(u, &unit)| {
            set.read(unit, Pass::Train).unwrap().into_iter().enumerate().map(move |(i, r)| (r.root, (u, i)))
        })
        .collect();
    let runs = |roots: &[i64]| roots.windows(2).filter(|w| unit_of[&w[0]].0 != unit_of[&w[1]].0).count() + 1;
    let unbuffered = roots(stream(&set, &plan, 0, order(1), 0, 0));
    assert_eq!(runs(&unbuffered), 4);
    // The units come in the epoch's seeded order, however many threads decode them ahead.
    let mut visited: Vec<usize> = unbuffered.iter().map(|r| unit_of[r].0).collect();
    visited.dedup();
    assert_eq!(visited, graphtrainer::stream::epoch_order(4, 9, 1, 0));
    assert!(unbuffered.windows(2).all(|w| unit_of[&w[0]].0 != unit_of[&w[1]].0 || unit_of[&w[0]].1 < unit_of[&w[1]].1));
    assert!(runs(&first) > 20, "a 1 MiB buffer left {} runs", runs(&first));
}

/// Each row group's split values, read with parquet's own reader: per part file, per row group.
fn splits_by_row_group(flat: &Path) -> Vec<Vec<std::collections::BTreeSet<Option<String>>>> {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let open = |file: &Path| ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap()).unwrap();
    parquet_files(flat)
        .iter()
        .map(|file| {
            (0..open(file).metadata().num_row_groups())
                .map(|group| {
                    let builder = open(file);
                    let split = ProjectionMask::columns(builder.parquet_schema(), ["split"]);
                    let reader = builder.with_row_groups(vec![group]).with_projection(split).build().unwrap();
                    reader
                        .flat_map(|batch| {
                            let column = batch.unwrap().column(0).as_string::<i32>().clone();
                            (0..column.len())
                                .map(|i| column.is_valid(i).then(|| column.value(i).to_string()))
                                .collect::<Vec<_>>()
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

#[test]
fn each_split_is_written_in_row_groups_of_its_own_and_a_pass_reads_only_its_own() {
    let dir = scratch("train-split-row-groups");
    let data = dir.join("graph");
    // Records of about 20 nodes of 512 features (40 kB): the training records fill more than
    // one row group (32 MB of records as they are in memory), so row groups close mid-stream.
    generate(&data, 3000, 8, 512, 4);
    let flat = flatten(&dir, &data, "flat", &["--workers", "1"], |job| job.key("hops", 2).key("fanouts", vec![10, 10]));
    let layout = splits_by_row_group(&flat);
    let mut groups: std::collections::BTreeMap<Option<String>, usize> = Default::default();
    for (file, part) in layout.iter().enumerate() {
        for (group, splits) in part.iter().enumerate() {
            assert_eq!(splits.len(), 1, "part {file}, row group {group} holds the splits {splits:?}");
            *groups.entry(splits.first().unwrap().clone()).or_default() += 1;
        }
    }
    let names = |s: &str| Some(s.to_string());
    assert_eq!(groups.keys().cloned().collect::<Vec<_>>(), vec![names("test"), names("train"), names("valid")]);
    assert!(groups[&names("train")] > 1, "the training records in one row group: {groups:?}");
    // Every record is still written once.
    let records = read_records(&flat);
    assert_eq!(records.len(), 3000);
    assert!(records.windows(2).all(|w| w[0].root < w[1].root));
    // The trainer's plan reads a unit for a pass only if it holds that pass's records.
    let set = Arc::new(RecordSet::open(local_io(), flat.to_str().unwrap()).unwrap());
    let plan = plan_of(&set, 2);
    for pass in [Pass::Train, Pass::Evaluate] {
        let read: Vec<Unit> = (0..2).flat_map(|w| plan.units_of(w, pass)).collect();
        let holding: Vec<Unit> = set.units().into_iter().filter(|&u| !set.read(u, pass).unwrap().is_empty()).collect();
        assert_eq!(read.len(), holding.len(), "{pass:?}");
        assert!(holding.iter().all(|u| read.contains(u)), "{pass:?}");
    }
}

#[test]
fn a_unit_that_fails_to_decode_mid_pass_ends_the_stream_with_its_error() {
    let dir = scratch("train-stream-error");
    let (flat, set) = four_unit_records(&dir);
    let train = train_units(&set);
    assert_eq!(train.len(), 4);
    let plan = plan_of(&set, 1);
    let order = Order { seed: 9, epoch: 1, worker: 0 };
    // The third unit the pass visits: the readers decode ahead, so a failure there must still
    // reach the stream after the first two units' records, as an error, not as the pass's end.
    let third = train[graphtrainer::stream::epoch_order(4, 9, 1, 0)[2]];
    let part = &parquet_files(&flat)[third.file];
    std::fs::write(part, b"not parquet any more").unwrap();
    let units = plan.units_of(0, Pass::Train);
    let source = Arc::new(Source::<Record>::new(set.clone(), 0));
    let got: Vec<_> = RecordStream::train(source, &units, order, 0).collect();
    let (records, errors): (Vec<_>, Vec<_>) = got.iter().partition(|r| r.is_ok());
    assert_eq!(errors.len(), 1, "one error, then the stream ends");
    assert!(got.last().unwrap().is_err(), "the error is the stream's last item");
    let read = |i: usize| set.read(train[graphtrainer::stream::epoch_order(4, 9, 1, 0)[i]], Pass::Train).unwrap().len();
    assert_eq!(records.len(), read(0) + read(1), "the first two units' records come first");
    let message = got.last().unwrap().as_ref().err().unwrap().to_string();
    let name = part.file_name().unwrap().to_str().unwrap();
    assert!(message.contains(name), "the error names the part file: {message}");
}

/// A pass dropped before its end (the next epoch's, started early, when training stops early
/// or fails) stops its loader: dropping it returns while the loader waits on a full queue, and
/// every thread of the pass ends soon after (none holds the source).
#[test]
fn a_pass_dropped_before_its_end_stops_its_loader() {
    use graphtrainer::loader::Batches;
    let dir = scratch("train-loader-drop");
    let (_, set) = four_unit_records(&dir);
    let units = plan_of(&set, 1).units_of(0, Pass::Train);
    let source = Arc::new(Source::<Record>::new(set.clone(), 0));
    let records = RecordStream::train(source.clone(), &units, Order { seed: 9, epoch: 0, worker: 0 }, 0);
    let mut batches = Batches::new(records, 1, gnn::batch::BatchSpec::plain(set.meta.layers()), 1);
    assert!(batches.next_batch().unwrap().is_some());
    // The loader fills its queue of one and blocks; the pass holds hundreds of records more.
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(batches);
    // The loader wakes to a closed queue and drops its stream; the readers then find theirs
    // closed. Neither is joined (see `graphtrainer::loader`).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while Arc::strong_count(&source) > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(Arc::strong_count(&source), 1, "a thread of the dropped pass still holds the source");
}

#[test]
fn sync_two_workers_equal_one_worker_on_the_combined_batches() {
    let dir = scratch("train-sync");
    let flat = two_part_records(&dir);
    let set = Arc::new(RecordSet::open(local_io(), flat.to_str().unwrap()).unwrap());
    let (epochs, batch_size, seed) = (3, 40, 7);
    for model in ["gcn", "sage", "gat"] {
        let settings = |out: &str| {
            let job = Job::train(&flat, dir.join(format!("{model}-{out}"))).key("model", model);
            let job = job.key("epochs", epochs as i64).key("batch_size", batch_size as i64).key("seed", seed as i64);
            job.key("heads", 2).key("attention_dropout", 0.2).key("prefetch", 2)
        };
        let two = train_on(2, train_config(settings("two")), set.clone(), None);

        // What each of the two workers trains on, step by step, concatenated.
        let plan = plan_of(&set, 2);
        let per_epoch: Vec<Vec<Vec<Vec<Record>>>> = (0..epochs)
            .map(|epoch| (0..2).map(|w| epoch_batches(&set, &plan, w, epoch, seed, batch_size)).collect())
            .collect();
        let steps = plan.steps(batch_size);
        let combined: Vec<Vec<Vec<Record>>> = per_epoch
            .iter()
            .map(|workers| {
                (0..steps)
                    .map(|s| workers.iter().flat_map(|b| b.get(s).cloned().unwrap_or_default()).collect())
                    .collect()
            })
            .collect();
        let one = train_on(1, train_config(settings("one")), set.clone(), Some((Arc::new(combined), steps)));

        assert_eq!(one.len(), two.len());
        let worst = one.iter().zip(&two).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{model}: parameters differ by up to {worst}");
        let initial = train_on(1, train_config(settings("zero").key("epochs", 1).key("lr", 1e-9)), set.clone(), None);
        assert!(one.iter().zip(&initial).any(|(a, b)| (a - b).abs() > 1e-3), "{model}: training moved nothing");
    }
}

#[test]
fn resume_from_a_checkpoint_reaches_the_uninterrupted_parameters() {
    let dir = scratch("train-resume");
    let flat = two_part_records(&dir);
    let set = Arc::new(RecordSet::open(local_io(), flat.to_str().unwrap()).unwrap());
    let settings = |out: &Path| {
        Job::train(&flat, out).key("model", "sage").key("batch_size", 50).key("seed", 3).key("checkpoint_every", 2)
    };
    let whole = train_on(2, train_config(settings(&dir.join("whole")).key("epochs", 5)), set.clone(), None);
    let out = dir.join("interrupted");
    let first = train_on(2, train_config(settings(&out).key("epochs", 2)), set.clone(), None);
    assert!(out.join("checkpoints").exists());
    let resumed = train_on(2, train_config(settings(&out).key("epochs", 5).key("resume", true)), set.clone(), None);
    assert_ne!(first, whole);
    let worst = resumed.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-6, "resumed parameters differ by up to {worst}");
}

#[test]
fn two_processes_train_like_two_workers_in_one() {
    let dir = scratch("train-processes");
    let flat = two_part_records(&dir);
    let train = |out: &Path| {
        let job = Job::train(&flat, out).key("model", "gat").key("heads", 2).key("epochs", 3);
        job.key("batch_size", 40).key("seed", 1)
    };
    let (threads, processes) = (dir.join("threads"), dir.join("processes"));
    run_ok(&train(&threads).write(&dir, "threads"), &["--workers", "2"]);
    run_two_processes(&Job::loopback(2).and(train(&processes)).write(&dir, "processes"), &dir);

    let device = burn::prelude::Device::flex();
    let (_, a) = gnn::io::load(&local_io(), threads.to_str().unwrap(), &device).unwrap();
    let (meta, b) = gnn::io::load(&local_io(), processes.to_str().unwrap(), &device).unwrap();
    let (a, b) = (gnn::params::flatten(&a), gnn::params::flatten(&b));
    assert_eq!((a.len(), meta.parameters), (b.len(), b.len()));
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "2 processes differ from 2 threads by up to {worst}");
}

#[test]
fn async_mode_with_bounded_staleness_trains_as_well_as_sync() {
    let dir = scratch("train-async");
    let data = dir.join("graph");
    generate(&data, 3000, 10, 16, 8);
    let flat = flatten(&dir, &data, "flat", &["--workers", "1"], |job| job.key("hops", 2).key("fanouts", vec![10, 10]));
    let mut accuracy = Vec::new();
    for mode in ["sync", "async"] {
        let model = dir.join(mode);
        let job = Job::train(&flat, &model).key("epochs", 30).key("batch_size", 64).key("hidden", 32);
        run_ok(&job.key("mode", mode).key("staleness", 2).write(&dir, mode), &["--workers", "2"]);
        accuracy.push(final_test_accuracy(&model));
    }
    eprintln!("generated graph, 2 workers: sync {:.3}, async (staleness 2) {:.3}", accuracy[0], accuracy[1]);
    assert!(accuracy[1] > 0.6 && accuracy[1] > accuracy[0] - 0.05, "sync {} vs async {}", accuracy[0], accuracy[1]);
}

#[test]
fn reads_records_through_a_uri_and_refuses_an_unfinished_set() {
    let dir = scratch("train-uri");
    let data = dir.join("graph");
    generate(&data, 400, 6, 8, 2);
    let flat = flatten(&dir, &data, "flat", &["--workers", "1"], |job| job.key("hops", 2));
    let uri = format!("file://{}", flat.canonicalize().unwrap().display());
    let model = dir.join("model");
    let train = Job::train(&uri, &model).key("epochs", 3);
    run_ok(&train.write(&dir, "train"), &[]);
    assert_eq!(std::fs::read_to_string(model.join("metrics.jsonl")).unwrap().lines().count(), 3);

    std::fs::remove_file(flat.join("_SUCCESS")).unwrap();
    let out = run(&train.write(&dir, "train"), &[]);
    let message = text(&out);
    assert!(!out.status.success() && message.contains("no _SUCCESS marker"), "{message}");
}

/// What `Source::hold` counts (control variates' kept roots) comes out of the cache's budget:
/// what is cached after it fits beside it, held past the budget nothing is, and the records read
/// are the same whatever is cached.
#[test]
fn bytes_held_beside_the_cache_leave_the_records_less_room() {
    let dir = scratch("train-hold");
    let (_, set) = four_unit_records(&dir);
    let units = train_units(&set);
    let roots_of = |source: &Source| -> Vec<i64> {
        units
            .iter()
            .flat_map(|&u| source.records(u, Pass::Train).unwrap().iter().map(|r| r.root).collect::<Vec<_>>())
            .collect()
    };
    let roomy = Source::new(set.clone(), 1 << 30);
    let all = roots_of(&roomy);
    let everything = roomy.cached_bytes();
    assert!(everything > 0 && all.len() > 100, "{everything} bytes of {} records", all.len());

    // Half the budget held: the four units cannot all be kept beside it.
    let (budget, held) = (everything, everything / 2);
    let tight = Source::new(set.clone(), budget);
    tight.hold(held);
    assert_eq!(roots_of(&tight), all);
    let kept = tight.cached_bytes() - held;
    assert!(kept + held <= budget && kept < everything, "kept {kept} of {everything} beside {held} held");
    assert_eq!(roots_of(&tight), all, "read again, from the cache where it kept them");

    // Held past the budget: nothing is cached.
    let full = Source::new(set.clone(), budget);
    full.hold(budget + 1);
    assert_eq!(roots_of(&full), all);
    assert_eq!(full.cached_bytes(), budget + 1);
}
