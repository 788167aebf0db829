//! The job ends fast and clearly on any failure, with an exit code by cause; the same inputs
//! give the same outputs; the small things a user sees (no colour codes in files, `inspect`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A small graph's records: `hops = 2`, `fanouts = [4, 3]`.
fn small(job: Job) -> Job {
    job.key("hops", 2).key("fanouts", vec![4, 3])
}

fn graph(dir: &Path) -> PathBuf {
    let data = dir.join("graph");
    generate(&data, 600, 6, 8, 2);
    data
}

/// Training on `records` into `dir/model-<name>` in batches of 64, with the keys set after it.
fn training(dir: &Path, name: &str, records: &Path) -> Job {
    Job::train(records, dir.join(format!("model-{name}"))).key("batch_size", 64)
}

#[test]
fn usage_missing_input_and_unwritable_output_have_their_exit_codes() {
    let dir = scratch("exit-codes");
    let typo = write_job(&dir, "typo", "[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nhopz = 2\n");
    assert_fails(&run(&typo, &["--workers", "1"]), 64, &["hopz"]);
    assert_eq!(graphflat().args(["run"]).output().unwrap().status.code(), Some(64));

    let missing = Job::flatten(dir.join("nowhere"), dir.join("out")).write(&dir, "missing");
    assert_fails(&run(&missing, &["--workers", "2"]), 66, &["nowhere"]);

    let data = graph(&dir);
    let flat = flatten(&dir, &data, "flat-one", &["--workers", "1"], small);
    let file = dir.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let to_file = Job::train(&flat, &file).key("epochs", 1).write(&dir, "to-file");
    assert_fails(&run(&to_file, &["--workers", "2"]), 73, &["a-file", "not a directory"]);
    // The same refusal at an input is an input that cannot be read (66), not an output.
    let through = file.join("records");
    let from_file = Job::train(&through, dir.join("model-from-file")).key("epochs", 1).write(&dir, "from-file");
    assert_fails(&run(&from_file, &["--workers", "2"]), 66, &["a-file/records", "Not a directory"]);
    let nodes_from_file = Job::flatten(&through, dir.join("out-from-file")).write(&dir, "nodes-from-file");
    assert_fails(&run(&nodes_from_file, &["--workers", "2"]), 66, &["a-file/records", "Not a directory"]);
}

/// Rewrites a record set with `edit` applied to every record.
fn edit_records(flat: &Path, out: &Path, edit: impl Fn(&mut schemas::Record)) {
    std::fs::create_dir_all(out).unwrap();
    for path in parquet_files(flat) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        let schema = reader.schema().clone();
        let target = std::fs::File::create(out.join(path.file_name().unwrap())).unwrap();
        let mut writer = ArrowWriter::try_new(target, schema.clone(), None).unwrap();
        for batch in reader.build().unwrap() {
            let mut records = schemas::record::from_batch(&batch.unwrap(), "x", 0).unwrap();
            records.iter_mut().for_each(&edit);
            writer.write(&schemas::record::to_batch(&records, &schema).unwrap()).unwrap();
        }
        writer.close().unwrap();
    }
    std::fs::write(out.join("_SUCCESS"), "").unwrap();
}

#[test]
fn bad_records_end_every_training_worker_with_file_row_and_column() {
    let dir = scratch("bad-records");
    let flat = flatten(&dir, &graph(&dir), "flat-two", &["--workers", "2"], small);
    // Labels 0..8 with classes = 2: the first too-large class is named where it is.
    let classes = training(&dir, "classes", &flat).key("classes", 2).key("epochs", 1).write(&dir, "train-classes");
    assert_fails(
        &run(&classes, &["--workers", "2"]),
        65,
        &["part-", "row", "column \"label\"", "not below classes = 2"],
    );

    let negative = dir.join("negative");
    edit_records(&flat, &negative, |r| {
        if r.root == 17 {
            r.label = Some(schemas::Label::Class(-1));
        }
    });
    let job = training(&dir, "negative", &negative).key("epochs", 1).write(&dir, "train-negative");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &["column \"label\"", "root 17", "negative"]);

    // A class id too large for any model (it would size the output layer) is named too.
    let huge = dir.join("huge");
    edit_records(&flat, &huge, |r| {
        if r.root == 17 {
            r.label = Some(schemas::Label::Class(1 << 62));
        }
    });
    let job = training(&dir, "huge", &huge).key("epochs", 1).write(&dir, "train-huge");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &["column \"label\"", "root 17", "the most classes"]);

    let cut = dir.join("cut");
    edit_records(&flat, &cut, |r| {
        if r.root == 5 && !r.edge_src.is_empty() {
            r.edge_src[0] = r.node_ids.len() as i32;
        }
    });
    let job = training(&dir, "cut", &cut).key("epochs", 1).write(&dir, "train-cut");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &["column \"edge_src\"", "out of range"]);
}

/// A change to one record.
type Edit<'a> = &'a dyn Fn(&mut schemas::Record);

#[test]
fn corrupt_records_are_bad_data_and_non_finite_settings_are_usage_errors() {
    let dir = scratch("corrupt-records");
    let flat = flatten(&dir, &graph(&dir), "flat-two", &["--workers", "2"], small);
    let cases: [(&str, Edit, &[&str]); 4] = [
        (
            "hop",
            &|r| {
                if let Some(h) = r.hops.last_mut() {
                    *h = 7
                }
            },
            &["column \"node_hops\"", "hop 7"],
        ),
        (
            "mask",
            &|r| {
                if let Some(m) = r.edge_layers.first_mut() {
                    *m |= 0b100
                }
            },
            &["column \"edge_layers\"", "layer mask"],
        ),
        (
            "layer",
            &|r| {
                // An edge from the farthest hop marked for the last layer.
                if let Some(j) = (0..r.edge_src.len()).find(|&j| r.hops[r.edge_src[j] as usize] == 2) {
                    r.edge_layers[j] = 0b10;
                }
            },
            &["column \"edge_layers\"", "cannot serve layer 2"],
        ),
        ("nan", &|r| r.features[0] = f32::NAN, &["column \"node_features\"", "NaN"]),
    ];
    for (name, edit, words) in cases {
        let bad = dir.join(name);
        edit_records(&flat, &bad, |r| {
            if r.root % 7 == 3 {
                edit(r)
            }
        });
        let job = training(&dir, name, &bad).key("epochs", 1).write(&dir, &format!("train-{name}"));
        let out = run(&job, &["--workers", "2"]);
        assert_fails(&out, 65, words);
        assert!(text(&out).contains("part-") && text(&out).contains("row"), "{name}: {}", text(&out));
        assert!(!dir.join(format!("model-{name}/_SUCCESS")).exists());
    }
    settings_that_cannot_work_are_usage_errors(&dir, &flat);
}

/// Settings that cannot work are usage errors before a run starts; a loss that overflows
/// stops the run with no model.
fn settings_that_cannot_work_are_usage_errors(dir: &Path, flat: &Path) {
    let settings: [(&str, &str, toml::Value); 4] = [
        ("lr", "lr", f64::NAN.into()),
        ("lr-inf", "lr", f64::INFINITY.into()),
        ("decay", "weight_decay", f64::NAN.into()),
        ("classes", "classes", 0.into()),
    ];
    for (name, key, value) in settings {
        let job = training(dir, name, flat).key("epochs", 1).key(key, value).write(dir, &format!("train-{name}"));
        assert_fails(&run(&job, &["--workers", "1"]), 64, &["[train]"]);
        assert!(!dir.join(format!("model-{name}")).exists(), "{name}: a run started");
    }
    // A loss that overflows stops the run with no model.
    let job = training(dir, "diverged", flat).key("epochs", 3).key("lr", 1e30).key("optimizer", "sgd");
    let out = run(&job.write(dir, "train-diverged"), &["--workers", "2"]);
    assert_fails(&out, 65, &["not finite", "no model"]);
    assert!(!dir.join("model-diverged/_SUCCESS").exists());
}

#[test]
fn job_files_and_uris_that_cannot_work_are_usage_errors_and_secrets_are_never_shown() {
    let dir = scratch("usage-errors");
    let bytes = dir.join("latin1.toml");
    std::fs::write(&bytes, b"[flatten]\nnodes = \"caf\xe9\"\n").unwrap();
    assert_fails(&run(&bytes, &["--workers", "1"]), 64, &["not UTF-8"]);
    // A job file named by mistake is never read whole: an endless one is a usage error.
    assert_fails(&run(std::path::Path::new("/dev/zero"), &["--workers", "1"]), 64, &["larger than 1048576 bytes"]);
    let huge = dir.join("huge.toml");
    std::fs::write(&huge, format!("# {}\n[flatten]\n", "x".repeat(1 << 20))).unwrap();
    assert_fails(&run(&huge, &["--workers", "1"]), 64, &["larger than"]);
    for (name, output) in [("no-bucket", "s3:///x"), ("dots", "s3://bucket/a/../b"), ("empty", "s3://bucket/a//b")] {
        let job = Job::flatten(dir.join("nowhere"), output).write(&dir, name);
        let out = run(&job, &["--workers", "1"]);
        assert_eq!(out.status.code(), Some(64), "{name}: {}", text(&out));
    }
    let secret = "hunter2-secret";
    for (name, body) in [
        ("key", format!("[storage]\nsecret_access_key = \"{secret}\"\n")),
        (
            "endpoint",
            Job::storage()
                .key("endpoint", format!("http://key:{secret}@127.0.0.1:1"))
                .and(Job::flatten(&dir, "s3://b/out"))
                .to_string(),
        ),
        ("uri", Job::flatten(dir.join("nowhere"), format!("s3://key:{secret}@bucket/out")).to_string()),
        // Every stage logs its inputs before it parses them.
        ("records", Job::train(format!("s3://key:{secret}@bucket/flat"), dir.join("m")).to_string()),
        ("model", Job::infer(dir.join("nowhere"), format!("s3://key:{secret}@bucket/m"), dir.join("s")).to_string()),
        ("generate", format!("[generate]\noutput = \"s3://key:{secret}@bucket/g\"\n")),
    ] {
        let out = run(&write_job(&dir, name, &body), &["--workers", "1"]);
        assert!(!out.status.success(), "{name}");
        assert!(!text(&out).contains(secret), "{name}: {}", text(&out));
    }
}

#[test]
fn nothing_to_learn_is_an_error_and_so_is_resuming_without_a_checkpoint() {
    let dir = scratch("nothing-to-learn");
    let data = graph(&dir);
    let test_only = flatten(&dir, &data, "flat-test-only", &["--workers", "2"], |j| small(j).key("targets", "test"));
    let job = training(&dir, "no-train", &test_only).key("epochs", 2).write(&dir, "train-no-train");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &["no training records with a label"]);
    assert!(!has_weights(&dir.join("model-no-train")));

    let train_only = flatten(&dir, &data, "flat-train-only", &["--workers", "1"], |j| small(j).key("targets", "train"));
    let job = training(&dir, "no-valid", &train_only).key("epochs", 2).key("patience", 5).write(&dir, "train-no-valid");
    assert_fails(&run(&job, &["--workers", "2"]), 65, &["no labeled validation records", "patience = 0"]);

    let job = training(&dir, "resume", &train_only).key("epochs", 2).write(&dir, "train-resume");
    assert_fails(&run(&job, &["--workers", "2", "--resume"]), 66, &["holds no checkpoint"]);

    // Checkpoints of 2 workers do not fit a resumed run on 1.
    let job = training(&dir, "resume-workers", &train_only).key("epochs", 2).key("checkpoint_every", 1);
    let job = job.write(&dir, "train-resume-workers");
    let first = run(&job, &["--workers", "2"]);
    assert!(first.status.success(), "{}", text(&first));
    assert_fails(&run(&job, &["--workers", "1", "--resume"]), 66, &["do not fit", "same number of workers"]);
    // A checkpoint larger than any of this model's could be is bad data, never read whole (a
    // sparse 8 GB file: reading it would take 8 GB).
    let checkpoints = dir.join("model-resume-workers/checkpoints");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&checkpoints).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let newest = names.last().expect("the run's checkpoints");
    let kept = std::fs::read(newest).unwrap();
    std::fs::OpenOptions::new().write(true).open(newest).unwrap().set_len(8 << 30).unwrap();
    assert_fails(&run(&job, &["--workers", "2", "--resume"]), 65, &["checkpoint-", "not read"]);
    std::fs::write(newest, kept).unwrap();
    let resumed = run(&job, &["--workers", "2", "--resume"]);
    assert!(text(&resumed).contains("resuming after epoch 2"), "{}", text(&resumed));
}

#[test]
fn the_same_inputs_give_the_same_records_model_and_metrics() {
    let dir = scratch("determinism-e2e");
    let data = graph(&dir);
    let [one, two, again] = [("flat-1", "1"), ("flat-2", "2"), ("flat-2b", "2")]
        .map(|(name, w)| flatten(&dir, &data, name, &["--workers", w], small));
    // Same worker count: the same bytes. Any worker count: the same records.
    let (a, b) = (parquet_files(&two), parquet_files(&again));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!(std::fs::read(x).unwrap() == std::fs::read(y).unwrap(), "{} and {} differ", x.display(), y.display());
    }
    assert_eq!(read_records(&one), read_records(&two));
    // Training twice on one record set gives the same model and metrics, byte for byte. (The
    // order records stream in follows the set's row groups, so records laid out by another
    // number of flatten workers train to another, equally valid, model: docs/graphtrainer.md.)
    let models: Vec<PathBuf> = ["first", "second"]
        .into_iter()
        .map(|name| {
            let job = training(&dir, name, &two).key("epochs", 4).key("model", "sage").key("seed", 5);
            let out = run(&job.write(&dir, &format!("train-{name}")), &["--workers", "2"]);
            assert!(out.status.success(), "{}", text(&out));
            assert!(!String::from_utf8_lossy(&out.stderr).contains('\x1b'), "colour codes in a log file");
            dir.join(format!("model-{name}"))
        })
        .collect();
    for file in ["model.bpk", "metrics.jsonl"] {
        let (x, y) =
            (std::fs::read(committed(&models[0], file)).unwrap(), std::fs::read(committed(&models[1], file)).unwrap());
        assert!(x == y, "{file} differs between two runs on the same records");
    }
    let metrics = std::fs::read_to_string(models[0].join("metrics.jsonl")).unwrap();
    assert!(metrics.lines().next().unwrap().contains("\"epoch\":1,"), "{metrics}");

    let shown = graphflat_ok(&["inspect", models[0].to_str().unwrap()]);
    assert!(shown.contains(".json") && shown.contains("\"sage\""), "{shown}");
    let shown = graphflat_ok(&["inspect", one.to_str().unwrap()]);
    assert!(
        shown.contains("labeled rows") && shown.contains("record nodes: mean") && shown.contains("train "),
        "{shown}"
    );
}

#[test]
fn sigterm_ends_a_job_with_its_exit_code_and_no_model() {
    let dir = scratch("sigterm");
    let flat = flatten(&dir, &graph(&dir), "flat-one", &["--workers", "1"], small);
    let job = training(&dir, "long", &flat).key("epochs", 100000).write(&dir, "train-long");
    let child =
        graphflat().args(["run", job.to_str().unwrap(), "--workers", "2"]).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_fails(&out, 143, &["stopped by SIGTERM"]);
    assert!(!has_weights(&dir.join("model-long")));
}

#[test]
fn a_dead_peer_process_ends_the_others_with_one_plain_message() {
    let dir = scratch("dead-peer");
    let flat = flatten(&dir, &graph(&dir), "flat-one", &["--workers", "1"], small);
    let job = Job::loopback(2).and(Job::train(&flat, dir.join("model")).key("epochs", 100000)).write(&dir, "two");
    let spawn = |p: usize| {
        graphflat()
            .args(["run", job.to_str().unwrap(), "--process", &p.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (survivor, mut victim) = (spawn(0), spawn(1));
    std::thread::sleep(Duration::from_secs(4));
    victim.kill().unwrap();
    let killed = Instant::now();
    let out = survivor.wait_with_output().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(20), "took {:?}", killed.elapsed());
    assert_fails(&out, 75, &["lost a peer process"]);
    let _ = victim.wait();
}
