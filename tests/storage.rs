//! The table layer as users meet it: Parquet from other tools (every codec, any file name,
//! globs), the commit protocol (a manifest written last, outputs that never touch inputs, a
//! finished output kept unless `overwrite`, leftovers of killed runs ignored and removed, two
//! racing runs of which exactly one commits).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use arrow_array::{ArrayRef, Float32Array, Int64Array, ListArray, RecordBatch};
use arrow_schema::{DataType, Field};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel};
use parquet::file::properties::WriterProperties;

/// A small graph written by the parquet crate with `codec`, as other tools write tables: one
/// file per table named `name`.
fn write_graph(dir: &Path, codec: Compression, name: &str) {
    let n = 300i64;
    let ids: Vec<i64> = (0..n).collect();
    let features: Vec<f32> = (0..n * 4).map(|i| ((i * 37) % 11) as f32 / 10.0).collect();
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let list = ListArray::new(
        item,
        arrow_buffer::OffsetBuffer::from_lengths(std::iter::repeat_n(4, n as usize)),
        Arc::new(Float32Array::from(features)),
        None,
    );
    let nodes = RecordBatch::try_from_iter([
        ("node_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("features", Arc::new(list) as ArrayRef),
    ])
    .unwrap();
    let (src, dst): (Vec<i64>, Vec<i64>) = (0..n * 5).map(|i| ((i * 7919) % n, (i * 104_729 + 3) % n)).unzip();
    let edges = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(src)) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(dst)) as ArrayRef),
    ])
    .unwrap();
    for (table, batch) in [("nodes", nodes), ("edges", edges)] {
        std::fs::create_dir_all(dir.join(table)).unwrap();
        let file = std::fs::File::create(dir.join(table).join(name)).unwrap();
        let props = WriterProperties::builder().set_compression(codec).build();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }
}

/// Two workers.
const TWO: &[&str] = &["--workers", "2"];

/// The flatten settings of these tests: `fanouts = [3, 3]`.
fn fanouts(job: Job) -> Job {
    job.key("fanouts", vec![3, 3])
}

/// The same, writing over a finished output.
fn overwriting(job: Job) -> Job {
    fanouts(job).key("overwrite", true)
}

#[test]
fn every_codec_and_any_file_name_read_the_same() {
    let dir = scratch("storage-codecs");
    let reference = dir.join("zstd");
    write_graph(&reference, Compression::ZSTD(Default::default()), "part-0.parquet");
    let expected = read_records(&flatten(&dir, &reference, "flat-zstd", TWO, fanouts));
    assert_eq!(expected.len(), 300);
    let codecs = [
        ("snappy", Compression::SNAPPY, "data.snappy.parquet"),
        ("gzip", Compression::GZIP(GzipLevel::default()), "table.gz"),
        ("lz4", Compression::LZ4_RAW, "file-without-extension"),
        ("brotli", Compression::BROTLI(BrotliLevel::default()), "x.parquet"),
        ("none", Compression::UNCOMPRESSED, "y.parquet"),
    ];
    for (name, codec, file) in codecs {
        let data = dir.join(name);
        write_graph(&data, codec, file);
        // Hidden and `_`-prefixed files are not data (Hadoop's and Spark's markers, temporaries).
        std::fs::write(data.join("nodes/_SUCCESS"), "").unwrap();
        std::fs::write(data.join("edges/.part-9.crc"), "not parquet").unwrap();
        std::fs::write(data.join("edges/_temporary"), "not parquet").unwrap();
        // Nor is a job's report, which a failed run leaves in an output without a manifest.
        std::fs::write(data.join("nodes/report.html"), "<!DOCTYPE html>").unwrap();
        let got = read_records(&flatten(&dir, &data, &format!("flat-{name}"), TWO, fanouts));
        assert!(got == expected, "{name}: records differ from the zstd tables'");
    }
}

#[test]
fn globs_and_bad_files_in_input_directories() {
    let dir = scratch("storage-inputs");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    let expected = read_records(&flatten(&dir, &data, "flat", TWO, fanouts));

    // A glob picks the matching files of its directory only.
    std::fs::write(data.join("edges/notes.txt"), "these are not edges").unwrap();
    let glob = dir.join("glob");
    std::fs::create_dir_all(&glob).unwrap();
    let edges = data.join("edges/*.parquet").display().to_string();
    run_ok(&fanouts(Job::flatten(&data, glob.join("flat")).key("edges", edges)).write(&dir, "glob"), &[]);
    assert!(read_records(&glob.join("flat")) == expected);

    // A single file is a table too.
    let file = data.join("edges/part-0.parquet").display().to_string();
    run_ok(&fanouts(Job::flatten(&data, glob.join("one-file")).key("edges", file)).write(&dir, "one-file"), &[]);
    assert!(read_records(&glob.join("one-file")) == expected);

    // Without the glob the text file is part of the table, and it is not Parquet: said as such,
    // with its path, whatever its size (one shorter than a footer, one longer).
    for notes in ["short", "these are not edges, and there are more of them than a footer"] {
        std::fs::write(data.join("edges/notes.txt"), notes).unwrap();
        let out = dir.join("with-text");
        let output = run(&fanouts(Job::flatten(&data, &out)).write(&dir, "with-text"), TWO);
        let file = data.join("edges/notes.txt").display().to_string();
        assert_fails(&output, 65, &[&format!("{file}: not a Parquet file ({} bytes", notes.len())]);
        assert!(!out.join("_SUCCESS").exists());
    }

    // A truncated Parquet file is named too.
    std::fs::remove_file(data.join("edges/notes.txt")).unwrap();
    let bytes = std::fs::read(data.join("edges/part-0.parquet")).unwrap();
    std::fs::write(data.join("edges/part-1.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let output = run(&fanouts(Job::flatten(&data, dir.join("truncated"))).write(&dir, "truncated"), TWO);
    assert_eq!(output.status.code(), Some(65), "{}", text(&output));
    assert!(text(&output).contains("part-1.parquet"), "{}", text(&output));
    std::fs::remove_file(data.join("edges/part-1.parquet")).unwrap();
    fifos_and_directories_are_never_opened(&dir, &data, &expected);
}

/// A FIFO is never opened (that would block the reader): in a directory it is no data file,
/// given as the table or listed by a manifest it is bad data, named; a listed part replaced
/// by a directory is bad data too, not a store to retry (75).
fn fifos_and_directories_are_never_opened(dir: &Path, data: &Path, expected: &[Record]) {
    let mkfifo = |path: &Path| assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    mkfifo(&data.join("edges/part-1.parquet"));
    let listed = flatten(dir, data, "fifo-beside", TWO, fanouts);
    assert!(read_records(&listed) == *expected, "a FIFO in a directory is not data");
    let fifo = data.join("edges/part-1.parquet").display().to_string();
    let output =
        run(&fanouts(Job::flatten(data, dir.join("fifo-table")).key("edges", fifo)).write(dir, "fifo-table"), TWO);
    assert_fails(&output, 65, &["part-1.parquet", "not a regular file"]);
    let part = parquet_files(&listed).remove(0);
    std::fs::remove_file(&part).unwrap();
    mkfifo(&part);
    let output = run(&Job::train(&listed, dir.join("fifo-listed")).write(dir, "fifo-listed"), TWO);
    assert_fails(&output, 65, &[part.file_name().unwrap().to_str().unwrap(), "not a regular file"]);

    // A listed part replaced by a directory is bad data too, not a store to retry (75).
    std::fs::remove_file(&part).unwrap();
    std::fs::create_dir(&part).unwrap();
    let output = run(&Job::train(&listed, dir.join("dir-listed")).write(dir, "dir-listed"), TWO);
    assert_fails(&output, 65, &[part.file_name().unwrap().to_str().unwrap(), "not a regular file"]);
}

#[test]
fn a_model_file_or_marker_that_is_not_a_regular_file_is_never_opened() {
    let dir = scratch("storage-model-fifo");
    let data = dir.join("data");
    generate(&data, 300, 4, 4, 1);
    let flat = flatten(&dir, &data, "flat", TWO, fanouts);
    let model = dir.join("model");
    run_ok(&Job::train(&flat, &model).key("epochs", 2).write(&dir, "train"), TWO);
    let mkfifo = |path: &Path| {
        std::fs::remove_file(path).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    };
    let inspect = || bounded(&["inspect", model.to_str().unwrap()]);
    // The epochs' metrics are left out of `inspect`; the model's weights are bad data.
    mkfifo(&model.join("metrics.jsonl"));
    let out = inspect();
    assert!(out.status.success() && !text(&out).contains("epochs in"), "{}", text(&out));
    let weights = model_file(&model, ".bpk");
    mkfifo(&weights);
    assert_fails(&inspect(), 65, &[weights.file_name().unwrap().to_str().unwrap(), "not a regular file"]);
    // A records' marker that is a directory is bad data too, not a missing marker.
    std::fs::remove_file(flat.join("_SUCCESS")).unwrap();
    std::fs::create_dir(flat.join("_SUCCESS")).unwrap();
    let out = run(&Job::train(&flat, dir.join("again")).write(&dir, "again"), TWO);
    assert_fails(&out, 65, &["_SUCCESS", "not a regular file"]);
}

#[test]
fn outputs_never_touch_inputs_and_finished_outputs_are_kept() {
    let dir = scratch("storage-outputs");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    for output in [data.clone(), data.join("edges"), data.join("nodes/inside")] {
        let out = run(&Job::flatten(&data, &output).write(&dir, "touch"), &[]);
        assert_eq!(out.status.code(), Some(64), "{}", text(&out));
        assert!(text(&out).contains("choose another output"), "{}", text(&out));
        assert!(
            data.join("edges/part-0.parquet").exists() && data.join("nodes/part-0.parquet").exists(),
            "an input was deleted"
        );
    }

    let first = read_records(&flatten(&dir, &data, "flat", TWO, fanouts));
    let out = dir.join("flat");
    let again = run(&fanouts(Job::flatten(&data, &out)).write(&dir, "flat"), TWO);
    assert_eq!(again.status.code(), Some(73), "{}", text(&again));
    assert!(text(&again).contains("overwrite = true"), "{}", text(&again));
    assert!(read_records(&out) == first);
    assert!(read_records(&flatten(&dir, &data, "flat", TWO, overwriting)) == first);
}

#[test]
fn the_manifest_lists_every_part_with_rows_sizes_and_checksums_and_leftovers_go() {
    let dir = scratch("storage-manifest");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    let first = read_records(&flatten(&dir, &data, "flat", TWO, fanouts));
    let out = dir.join("flat");
    // What killed runs leave: the staged part and marker of a run whose process is gone, and,
    // as an earlier version left them, a staging file, a part and a marker beside the parts.
    let (dead, gone, old) = ("0000000000a00000001", "0000000000b00000002", "0000000000c00000003");
    let marker = |run: &str| {
        format!(r#"{{"run":"{run}","stage":"flatten","host":"h/b","pid":1,"pid_start":null,"heartbeat_ms":0}}"#)
    };
    std::fs::create_dir_all(out.join(format!("_temporary/{dead}"))).unwrap();
    std::fs::write(out.join(format!("_temporary/{dead}/run.json")), marker(dead)).unwrap();
    let staged = out.join(format!("_temporary/{dead}/part-{dead}-00000-00000.parquet.staged"));
    std::fs::copy(parquet_files(&out)[0].clone(), staged).unwrap();
    std::fs::write(out.join(format!("part-{old}-00000-00000.parquet#1")), "half an upload").unwrap();
    std::fs::copy(parquet_files(&out)[0].clone(), out.join(format!("part-{gone}-00000-00000.parquet"))).unwrap();
    std::fs::write(out.join(format!("_run-{gone}.json")), marker(gone)).unwrap();
    // Readers of this project take only what the manifest lists: training and re-reading see
    // the same records.
    assert!(read_listed_records(&out) == first);
    assert!(read_records(&flatten(&dir, &data, "flat", TWO, overwriting)) == first);

    let m = manifest(&out);
    let parts = m["parts"].as_array().unwrap();
    let mut listed: Vec<String> = parts.iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect();
    // The manifest and the empty _SUCCESS: nothing else, no report in a table's directory.
    listed.extend(["_SUCCESS".into(), "_manifest.parquet".into()]);
    listed.sort();
    assert_eq!(names(&out), listed, "leftovers were not removed");
    assert_eq!(std::fs::metadata(out.join("_SUCCESS")).unwrap().len(), 0, "_SUCCESS is empty, as Spark writes it");
    let rows: u64 = parts.iter().map(|p| p["rows"].as_u64().unwrap()).sum();
    assert_eq!((rows, m["rows"].as_u64().unwrap()), (300, 300));
    let block = m["block_bytes"].as_u64().unwrap() as usize;
    for p in parts {
        let bytes = std::fs::read(out.join(p["name"].as_str().unwrap())).unwrap();
        assert_eq!(bytes.len() as u64, p["bytes"].as_u64().unwrap());
        assert_eq!(crc32fast::hash(&bytes), p["crc32"].as_u64().unwrap() as u32, "checksum of {}", p["name"]);
        let blocks: Vec<u32> = bytes.chunks(block).map(crc32fast::hash).collect();
        let encoded = blocks.iter().flat_map(|c| c.to_le_bytes()).collect::<Vec<u8>>();
        use base64::Engine;
        assert_eq!(p["blocks"], base64::engine::general_purpose::STANDARD.encode(encoded), "blocks of {}", p["name"]);
    }
    assert_eq!(m["stage"], "flatten");
    assert_eq!(m["settings"]["fanouts"], serde_json::json!([3, 3]));
    assert_every_reader_reads_the_manifest(&[&out]);
}

/// Waits until `done` holds or a minute has passed.
fn wait_for(done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The files under `out/_temporary`, at any depth.
fn staged(out: &Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match entry.file_type().unwrap().is_dir() {
                true => walk(&entry.path(), found),
                false => found.push(entry.path()),
            }
        }
    }
    let mut found = Vec::new();
    walk(&out.join("_temporary"), &mut found);
    found
}

#[test]
fn a_killed_run_leaves_no_success_and_its_rerun_reads_no_leftover() {
    let dir = scratch("storage-killed");
    let data = dir.join("graph");
    generate(&data, 60_000, 10, 16, 3);
    let out = dir.join("flat");
    let job = Job::flatten(&data, &out).key("fanouts", vec![10, 10]).key("batch_size", 256).key("part_size_mb", 1);
    let path = job.write(&dir, "flatten");
    let mut child = graphflat()
        .args(["run", path.to_str().unwrap(), "--workers", "1"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once it has finished a part and is writing more.
    let parts_staged = || staged(&out).iter().filter(|p| p.to_string_lossy().ends_with(".parquet.staged")).count();
    wait_for(|| parts_staged() >= 2);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the run finished before it could be killed");
    assert!(!out.join("_SUCCESS").exists() && !out.join("_manifest.parquet").exists(), "a killed run committed");
    assert!(parts_staged() >= 2, "no parts were written before the kill");
    assert!(parquet_files(&out).is_empty(), "a killed run's parts are visible under data names");

    // Training refuses the unfinished output: no manifest, no data.
    let refused = run(&Job::train(&out, dir.join("model")).key("epochs", 1).write(&dir, "train"), &[]);
    assert_eq!(refused.status.code(), Some(66), "{}", text(&refused));

    // The re-run commits only its own parts and removes the killed run's.
    run_ok(&path, &["--workers", "1"]);
    let listed: Vec<String> =
        manifest(&out)["parts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect();
    let on_disk: Vec<String> =
        parquet_files(&out).iter().map(|p| p.file_name().unwrap().to_str().unwrap().to_owned()).collect();
    assert_eq!(on_disk, listed);
    assert!(!out.join("_temporary").exists(), "leftovers of the killed run remain: {:?}", staged(&out));
    assert_eq!(read_records(&out).len(), 60_000);
}

/// Runs `n` copies of the job at once, on one worker each.
fn race(path: &Path, n: usize) -> Vec<std::process::Output> {
    let children: Vec<_> = (0..n)
        .map(|_| {
            graphflat()
                .args(["run", path.to_str().unwrap(), "--workers", "1"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

#[test]
fn of_two_runs_racing_for_one_output_exactly_one_commits() {
    let dir = scratch("storage-race");
    let data = dir.join("graph");
    generate(&data, 20_000, 8, 8, 4);
    let out = dir.join("flat");
    let path = Job::flatten(&data, &out).key("fanouts", vec![5, 5]).write(&dir, "flatten");
    let outputs = race(&path, 2);
    let won = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(won, 1, "{}\n{}", text(&outputs[0]), text(&outputs[1]));
    let lost = outputs.iter().find(|o| !o.status.success()).unwrap();
    assert_eq!(lost.status.code(), Some(73), "{}", text(lost));
    // The loser took its marker and its parts away with it.
    assert!(!out.join("_temporary").exists(), "left behind: {:?}", staged(&out));
    // Readers see one run's complete output, this project's and every directory reader.
    let records = read_listed_records(&out);
    assert_eq!(records.len(), 20_000);
    assert!(records.windows(2).all(|w| w[0].root < w[1].root), "a node appears twice");
    assert_eq!(parquet_files(&out).len(), manifest(&out)["parts"].as_array().unwrap().len());
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn a_killed_training_run_leaves_no_model_and_its_rerun_equals_an_uninterrupted_one() {
    let dir = scratch("storage-killed-train");
    let data = dir.join("graph");
    generate(&data, 3000, 8, 16, 3);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![5, 5]));
    let train = |model: &Path| {
        let job = Job::train(&flat, model).key("model", "sage").key("epochs", 60).key("batch_size", 32);
        job.key("checkpoint_every", 1).key("seed", 4).write(&dir, model.file_name().unwrap().to_str().unwrap())
    };
    let (model, whole) = (dir.join("model"), dir.join("whole"));
    let mut child =
        graphflat().args(["run", train(&model).to_str().unwrap()]).stderr(std::process::Stdio::null()).spawn().unwrap();
    // Kill it after its first epoch, while it writes metrics and checkpoints.
    let training = |dir: &Path| {
        std::fs::read_dir(dir)
            .is_ok_and(|mut d| d.any(|e| e.unwrap().file_name().to_string_lossy().starts_with("metrics-")))
    };
    wait_for(|| training(&model));
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success(), "the run finished before it could be killed");
    for file in ["_SUCCESS", "_manifest.parquet", "metrics.jsonl"] {
        assert!(!model.join(file).exists(), "a killed training run left {file}");
    }
    assert!(!has_weights(&model), "a killed training run left its weights");

    // GraphInfer refuses the unfinished model.
    let refused = run(&Job::infer(&data, &model, dir.join("scores")).write(&dir, "infer"), &[]);
    assert_eq!(refused.status.code(), Some(66), "{}", text(&refused));
    assert!(text(&refused).contains("no manifest of a committed model"), "{}", text(&refused));

    // The re-run (fresh: no resume) commits the model an uninterrupted run commits.
    run_ok(&train(&model), &[]);
    run_ok(&train(&whole), &[]);
    for file in ["model.bpk", "model.json", "metrics.jsonl"] {
        let (a, b) = (std::fs::read(committed(&model, file)).unwrap(), std::fs::read(committed(&whole, file)).unwrap());
        assert!(a == b, "{file} differs");
    }
    assert_eq!(manifest(&model)["stage"], "train");
    // Without overwrite, a committed model is kept and the job fails.
    let again = run(&train(&model), &[]);
    assert_eq!(again.status.code(), Some(73), "{}", text(&again));
}

/// Whatever moment kills or stops a training run that overwrites a model, the committed model
/// stays whole and GraphInfer runs it: the run writes its files under new names and switches the
/// manifest last, so a reader holds either model's files, never a mix.
#[test]
fn a_training_run_killed_or_stopped_at_any_moment_keeps_the_committed_model_readable() {
    let dir = scratch("storage-killed-overwrite");
    let data = dir.join("graph");
    generate(&data, 2000, 8, 16, 3);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![5, 5]));
    let model = dir.join("model");
    let train = |seed: i64| {
        let job = Job::train(&flat, &model).key("model", "sage").key("epochs", 3).key("seed", seed);
        job.key("overwrite", true).write(&dir, &format!("train-{seed}"))
    };
    // The scores in a folder of their own: a trainer stopped inside its switch holds its
    // parent's commit lock, which a commit beside the model would wait for (60 s, then 75).
    let scores = dir.join("out").join("scores");
    let infer = Job::infer(&data, &model, scores).key("overwrite", true).write(&dir, "infer");
    let started = std::time::Instant::now();
    run_ok(&train(1), &[]);
    let whole = started.elapsed();
    for step in 1..=8u32 {
        let mut child = graphflat()
            .args(["run", train(i64::from(step) + 1).to_str().unwrap()])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole * step / 8);
        if step % 2 == 0 {
            // Stopped: a reader meanwhile reads the committed model; then it is killed.
            let pid = child.id().to_string();
            assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
            run_ok(&infer, &[]);
        }
        child.kill().unwrap();
        let _ = child.wait();
        run_ok(&infer, &[]);
    }
}

/// Two training runs racing for one model directory without `overwrite`: one commits, the other
/// exits 73 and leaves the winner's model whole.
#[test]
fn of_two_training_runs_racing_for_one_model_exactly_one_commits() {
    let dir = scratch("storage-train-race");
    let data = dir.join("graph");
    generate(&data, 2000, 8, 8, 2);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![4, 4]));
    let model = dir.join("model");
    let path = Job::train(&flat, &model).key("epochs", 2).write(&dir, "train");
    let outputs = race(&path, 2);
    assert_eq!(
        outputs.iter().filter(|o| o.status.success()).count(),
        1,
        "{}\n{}",
        text(&outputs[0]),
        text(&outputs[1])
    );
    let lost = outputs.iter().find(|o| !o.status.success()).unwrap();
    assert_eq!(lost.status.code(), Some(73), "{}", text(lost));
    assert!(!model.join("_temporary").exists(), "left behind: {:?}", names(&model));
    let listed: Vec<String> =
        manifest(&model)["parts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect();
    let files: Vec<String> = names(&model).into_iter().filter(|n| !n.starts_with('_')).collect();
    // The model's page is the winner's: the loser's failure does not replace it.
    let page = std::fs::read_to_string(model.join("report.html")).unwrap();
    assert!(!page.contains("committed this output first"), "the loser's report replaced the winner's");
    let fixed = ["metrics.jsonl", "timings.jsonl", "report.html"];
    assert!(files.iter().all(|f| listed.contains(f) || fixed.contains(&f.as_str())), "{files:?} against {listed:?}");
    run_ok(&Job::infer(&data, &model, dir.join("scores")).write(&dir, "infer"), &[]);
}

/// The names directly under `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn a_run_never_deletes_what_it_did_not_write_nor_commits_a_table_beside_it() {
    let dir = scratch("storage-foreign");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    let out = dir.join("flat");
    // Someone else's entries under the output, each of which some directory reader would read
    // with the records or fail on: a table in a subdirectory, a part named as other tools name
    // them, a symlink named like one of this project's parts (to an input), Parquet files in a
    // hidden folder and under a hidden name (DuckDB's **/*.parquet), hidden notes (polars).
    let lookalike = "part-0000000000100000001-00000-00000.parquet";
    let entries =
        ["other", "part-0.parquet", lookalike, "_mine", "_theirs.parquet", ".notes", "_notes.txt", "_temporary/zz"];
    std::fs::create_dir_all(out.join("other")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), out.join("other/part-0.parquet")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), out.join("part-0.parquet")).unwrap();
    std::os::unix::fs::symlink(data.join("edges/part-0.parquet"), out.join(lookalike)).unwrap();
    std::fs::create_dir_all(out.join("_mine")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), out.join("_mine/part-0.parquet")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), out.join("_theirs.parquet")).unwrap();
    std::fs::write(out.join(".notes"), "mine").unwrap();
    std::fs::write(out.join("_notes.txt"), "mine").unwrap();
    // And inside the folder where runs stage their parts, beside no run's folder.
    std::fs::create_dir_all(out.join("_temporary/zz")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), out.join("_temporary/zz/x.parquet")).unwrap();
    let before = names(&out);
    let refused = run(&fanouts(Job::flatten(&data, &out)).write(&dir, "flat"), TWO);
    assert_eq!(refused.status.code(), Some(73), "{}", text(&refused));
    assert!(text(&refused).contains("did not write") && text(&refused).contains("keeps none"), "{}", text(&refused));
    assert_eq!(names(&out), before, "a refused run changed the output");
    // Refused with overwrite too, naming one, changing nothing, until none is left.
    let mut left: Vec<&str> = entries.to_vec();
    loop {
        let before = names(&out);
        let refused = run(&overwriting(Job::flatten(&data, &out)).write(&dir, "flat"), TWO);
        if left.is_empty() {
            assert!(refused.status.success(), "{}", text(&refused));
            break;
        }
        assert_eq!(refused.status.code(), Some(73), "{left:?}: {}", text(&refused));
        let named = left.iter().position(|n| text(&refused).contains(&format!("/{n} was not written by this project")));
        let name = left.remove(named.unwrap_or_else(|| panic!("none of {left:?} named: {}", text(&refused))));
        assert_eq!(names(&out), before, "a refused run changed the output");
        std::fs::rename(out.join(name), dir.join(format!("away-{}", name.replace('/', "-")))).unwrap();
    }
    assert_eq!(std::fs::read_link(dir.join(format!("away-{lookalike}"))).unwrap(), data.join("edges/part-0.parquet"));
    assert_eq!(
        std::fs::read(dir.join("away-other/part-0.parquet")).unwrap(),
        std::fs::read(data.join("nodes/part-0.parquet")).unwrap()
    );
    let first = read_listed_records(&out);
    assert!(read_listed_records(&flatten(&dir, &data, "flat", TWO, overwriting)) == first);
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn overwriting_runs_racing_for_one_output_leave_one_complete_output() {
    let dir = scratch("storage-race-overwrite");
    let data = dir.join("graph");
    generate(&data, 20_000, 8, 8, 4);
    let out = dir.join("flat");
    let job = Job::flatten(&data, &out).key("fanouts", vec![5, 5]).key("part_size_mb", 1).key("overwrite", true);
    let path = job.write(&dir, "flatten");
    let reference = {
        run_ok(&path, &["--workers", "1"]);
        read_listed_records(&out)
    };
    for round in 0..3 {
        let outputs = race(&path, 3);
        for o in &outputs {
            assert!(o.status.success(), "round {round}: {}", text(o));
        }
        // Every listed part is there, whole, and they hold one run's records.
        for p in manifest(&out)["parts"].as_array().unwrap() {
            let bytes = std::fs::read(out.join(p["name"].as_str().unwrap())).unwrap();
            assert_eq!(crc32fast::hash(&bytes), p["crc32"].as_u64().unwrap() as u32, "round {round}: {}", p["name"]);
        }
        assert!(read_listed_records(&out) == reference, "round {round}: the committed output differs");
        // Once they have all ended, no part of a run that lost is left under a data name.
        let listed = manifest(&out)["parts"].as_array().unwrap().len();
        assert_eq!(parquet_files(&out).len(), listed, "round {round}: {:?}", names(&out));
        assert!(!out.join("_temporary").exists(), "round {round}: {:?}", staged(&out));
    }
    assert_every_reader_reads_the_manifest(&[&out]);
}

#[test]
fn an_output_reached_through_a_symlink_or_equal_to_the_model_is_refused() {
    let dir = scratch("storage-symlink-output");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    let link = dir.join("lnk");
    std::os::unix::fs::symlink(data.join("nodes"), &link).unwrap();
    for output in [link.clone(), link.join("inside")] {
        let out = run(&Job::flatten(&data, &output).key("overwrite", true).write(&dir, "link"), &[]);
        assert_eq!(out.status.code(), Some(64), "{}", text(&out));
        assert!(text(&out).contains("choose another output"), "{}", text(&out));
        assert_eq!(names(&data.join("nodes")), vec!["part-0.parquet"], "the node table was touched");
    }

    // A model, then GraphInfer asked to write over it.
    let data = dir.join("graph");
    generate(&data, 400, 5, 8, 2);
    let flat = flatten(&dir, &data, "flat", &[], fanouts);
    let model = dir.join("model");
    run_ok(&Job::train(&flat, &model).key("epochs", 1).write(&dir, "train"), &[]);
    let model_files = names(&model);
    let weights = std::fs::read(model_file(&model, ".bpk")).unwrap();
    let model_link = dir.join("model-link");
    std::os::unix::fs::symlink(&model, &model_link).unwrap();
    for output in [&model, &model_link] {
        let out = run(&Job::infer(&data, &model, output).key("overwrite", true).write(&dir, "infer"), &[]);
        assert_eq!(out.status.code(), Some(64), "{}", text(&out));
        assert!(text(&out).contains("choose another output"), "{}", text(&out));
    }
    assert_eq!(names(&model), model_files);
    assert!(std::fs::read(model_file(&model, ".bpk")).unwrap() == weights, "the model was changed");

    // A model output whose checkpoints/ is a symlink elsewhere: even `overwrite` never writes or
    // cleans up through it.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let precious = elsewhere.join("checkpoint-1a20000000000000000-00000.json");
    std::fs::write(&precious, "precious").unwrap();
    let linked = dir.join("model-linked-checkpoints");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&elsewhere, linked.join("checkpoints")).unwrap();
    let job = Job::train(&flat, &linked).key("epochs", 2).key("checkpoint_every", 1).key("overwrite", true);
    let out = run(&job.write(&dir, "train-linked"), &[]);
    assert_fails(&out, 73, &["checkpoints is not a directory"]);
    assert_eq!(names(&elsewhere), vec!["checkpoint-1a20000000000000000-00000.json"]);
}

#[test]
fn an_output_path_keeps_every_character() {
    let dir = scratch("storage-odd-names");
    let data = dir.join("data");
    write_graph(&data, Compression::SNAPPY, "part-0.parquet");
    let mut outputs = Vec::new();
    for name in ["what?", "a#b", "c%41d", "sp ace", "[x]*"] {
        let records = read_listed_records(&flatten(&dir, &data, name, TWO, fanouts));
        assert_eq!(records.len(), 300, "{name}");
        assert!(dir.join(name).join("_SUCCESS").exists(), "{name}: written somewhere else");
        // A glob reader takes `[x]` for a character class, as a shell does: no reader of a
        // directory by a pattern reads that one.
        if name != "[x]*" {
            outputs.push(dir.join(name));
        }
    }
    // An input path with glob characters that exists is that directory, not a pattern.
    let odd = dir.join("in?*");
    write_graph(&odd, Compression::SNAPPY, "part-0.parquet");
    assert_eq!(read_listed_records(&flatten(&dir, &odd, "from-odd", TWO, fanouts)).len(), 300);
    // And every reader of data teams reads the odd outputs.
    assert_every_reader_reads_the_manifest(&outputs.iter().map(PathBuf::as_path).collect::<Vec<_>>());
}

/// A committed part cut short after its manifest was written (the footer kept, bytes gone from
/// its middle): the reader names the file and both sizes, once, before it reads any of it.
#[test]
fn a_part_shorter_than_its_manifest_is_named_with_its_size() {
    let dir = scratch("storage-short-part");
    let data = dir.join("graph");
    generate(&data, 2000, 4, 8, 5);
    let part = parquet_files(&data.join("edges")).remove(0);
    let bytes = std::fs::read(&part).unwrap();
    let cut = [&bytes[..bytes.len() / 4], &bytes[bytes.len() / 2..]].concat();
    std::fs::write(&part, &cut).unwrap();
    let out = dir.join("flat");
    let output = run(&fanouts(Job::flatten(&data, &out)).write(&dir, "short"), TWO);
    let name = part.file_name().unwrap().to_str().unwrap();
    let size = format!("{} bytes where the manifest of run", cut.len());
    assert_fails(&output, 65, &[name, &size, &format!("says {}: the part changed after its commit", bytes.len())]);
    assert_eq!(text(&output).matches(&size).count(), 1, "{}", text(&output));
    assert_no_repeats(&output);
    assert!(!out.join("_SUCCESS").exists());
}

/// A part its manifest lists that is gone is a missing input (66), named, not bad data.
#[test]
fn a_listed_part_that_is_gone_is_a_missing_input() {
    let dir = scratch("storage-gone-part");
    let data = dir.join("graph");
    generate(&data, 2000, 4, 8, 5);
    let part = parquet_files(&data.join("nodes")).remove(0);
    std::fs::remove_file(&part).unwrap();
    let out = dir.join("flat");
    let output = run(&fanouts(Job::flatten(&data, &out)).write(&dir, "gone"), TWO);
    assert_fails(&output, 66, &[part.file_name().unwrap().to_str().unwrap(), "missing; the manifest of run"]);
    assert_no_repeats(&output);
    assert!(!out.join("_SUCCESS").exists());
}
