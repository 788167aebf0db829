//! Outputs as the tools data teams use read them (pyarrow, pandas, polars, DuckDB, Spark's
//! rule: `python/tests/readers.py`), and as this project's readers check them: every committed
//! output of every stage reads as exactly its manifest's rows with every reader and no option;
//! a part changed after its commit, or a manifest that lies, is named with both values; a reader
//! of an output that a later run replaces reads one run whole or exits 75 naming that run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, Int64Array, RecordBatch};

use crate::common::typed::flatten_typed;
use crate::common::*;

fn write_pairs(dir: &Path, pairs: &[(i64, i64)]) {
    std::fs::create_dir_all(dir).unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("src", Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.0)))),
        ("dst", Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.1)))),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// Every table a job writes: generated and split tables, node and link records, scores,
/// embeddings and pair scores, typed tables and typed records.
#[test]
fn every_output_reads_right_with_every_reader() {
    let dir = scratch("readers-outputs");
    let data = dir.join("graph");
    generate(&data, 1500, 6, 8, 3);
    let (flat, model, scores) = (dir.join("flat"), dir.join("model"), dir.join("scores"));
    let job = Job::cluster()
        .key("workers", 2)
        .and(Job::flatten(&data, &flat).key("fanouts", vec![4, 3]))
        .and(Job::train(&flat, &model).key("epochs", 2))
        .and(Job::infer(&data, &model, &scores));
    run_ok(&job.write(&dir, "node"), &[]);

    // The link task: split edges, link records, a link model's embeddings and pair scores.
    let linked = dir.join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(data.join("nodes"), linked.join("nodes")).unwrap();
    let split = linked.join("edges");
    graphflat_ok(&["split-edges", "--edges", data.join("edges").to_str().unwrap(), "--out", split.to_str().unwrap()]);
    let (links, link_model, out) = (dir.join("links"), dir.join("link-model"), dir.join("link-out"));
    let pairs = dir.join("pairs");
    write_pairs(&pairs, &[(0, 1), (2, 3), (5, 8), (13, 21)]);
    let job = Job::cluster()
        .key("workers", 2)
        .and(Job::flatten(&linked, &links).key("task", "link").key("fanouts", vec![3, 3]))
        .and(Job::train(&links, &link_model).key("epochs", 1))
        .and(
            Job::infer(&linked, &link_model, out.join("embeddings"))
                .key("pairs", pairs.to_str().unwrap())
                .key("pairs_output", out.join("pairs").to_str().unwrap()),
        );
    run_ok(&job.write(&dir, "link"), &[]);

    // A typed graph's tables and records.
    let typed = dir.join("typed");
    graphflat_ok(&["generate", "--hetero", "--out", typed.to_str().unwrap(), "--nodes", "600", "--seed", "2"]);
    let typed_flat = flatten_typed(&dir, &typed, "typed-flat", "", &["--workers", "2"]);

    let tables: Vec<PathBuf> = vec![
        data.join("nodes"),
        data.join("edges"),
        flat,
        scores,
        split,
        links,
        out.join("embeddings"),
        out.join("pairs"),
        typed.join("nodes/user"),
        typed.join("edges/buys"),
        typed_flat,
    ];
    let tables: Vec<&Path> = tables.iter().map(PathBuf::as_path).collect();
    for table in &tables {
        for name in names(table) {
            let data = !name.starts_with(['_', '.']);
            assert!(!data || name.ends_with(".parquet"), "{}: {name} is a data name but no part", table.display());
        }
        assert_eq!(std::fs::metadata(table.join("_SUCCESS")).unwrap().len(), 0, "{}", table.display());
    }
    assert_every_reader_reads_the_manifest(&tables);
}

/// The names directly under `dir`.
fn names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect()
}

/// Flips one bit of the byte at `at` (from the end when negative) of `file`, keeping its size.
fn flip(file: &Path, at: i64) {
    let mut bytes = std::fs::read(file).unwrap();
    let i = if at < 0 { bytes.len() - (-at) as usize } else { at as usize };
    bytes[i] ^= 0x04;
    std::fs::write(file, bytes).unwrap();
}

/// A byte changed in a committed part, anywhere (a page, the footer), or a manifest whose row
/// count lies: every reader of this project stops with 65, naming the part and both values,
/// before it uses a value of it.
#[test]
fn a_changed_byte_or_row_count_is_named_with_both_values() {
    let dir = scratch("readers-changed");
    let data = dir.join("graph");
    generate(&data, 800, 6, 8, 2);
    let flat = flatten(&dir, &data, "flat", &["--workers", "2"], |j| j.key("fanouts", vec![3, 3]));
    let train =
        |records: &Path, name: &str| run(&Job::train(records, dir.join(name)).key("epochs", 1).write(&dir, name), &[]);
    let copy = |from: &Path, name: &str| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to
    };
    // A byte in the middle of a records part (a page), and one in its footer.
    for (name, at) in [("middle", 20_000), ("footer", -20)] {
        let records = copy(&flat, name);
        let part = parquet_files(&records).remove(0);
        flip(&part, at);
        let out = train(&records, &format!("model-{name}"));
        let file = part.file_name().unwrap().to_str().unwrap();
        assert_fails(&out, 65, &[file, "have CRC-32", "where the manifest of run", "changed after its commit"]);
    }
    // A byte of a generated node table: the flatten that reads it.
    let nodes = copy(&data.join("nodes"), "changed/nodes");
    std::os::unix::fs::symlink(data.join("edges"), dir.join("changed/edges")).unwrap();
    let part = parquet_files(&nodes).remove(0);
    flip(&part, 3000);
    let out = run(&Job::flatten(dir.join("changed"), dir.join("flat-changed")).write(&dir, "nodes"), &[]);
    assert_fails(&out, 65, &[part.file_name().unwrap().to_str().unwrap(), "have CRC-32", "where the manifest of run"]);
    // A manifest whose rows for a part are one more, or one less, than the part holds.
    for (name, delta) in [("more", 1i64), ("fewer", -1)] {
        let records = copy(&flat, name);
        let listed = manifest(&records)["parts"][0]["rows"].as_i64().unwrap();
        edit_manifest(&records, |m| m["parts"][0]["rows"] = (listed + delta).into());
        let out = train(&records, &format!("model-{name}"));
        assert_fails(
            &out,
            65,
            &[&format!("{listed} rows where the manifest of run"), &format!("says {}", listed + delta)],
        );
    }
}

/// `inspect` lists what a table's directory holds besides what its manifest lists, after it
/// removed what ended runs left there (`tables::commit::settle`).
#[test]
fn inspect_lists_the_files_a_manifest_does_not() {
    let dir = scratch("readers-inspect");
    let data = dir.join("graph");
    generate(&data, 300, 4, 4, 1);
    let nodes = data.join("nodes");
    assert!(!graphflat_ok(&["inspect", nodes.to_str().unwrap()]).contains("does not list"));
    let part = parquet_files(&nodes).remove(0);
    std::fs::copy(&part, nodes.join("part-stray.parquet")).unwrap();
    std::fs::create_dir_all(nodes.join("_temporary/0000000000a00000001")).unwrap();
    std::fs::write(nodes.join("_temporary/0000000000a00000001/run.json"), "{}").unwrap();
    let shown = graphflat_ok(&["inspect", nodes.to_str().unwrap()]);
    assert!(shown.contains("1 files its manifest"), "{shown}");
    assert!(shown.contains("1 of them with data names"), "{shown}");
    assert!(shown.contains("part-stray.parquet"), "{shown}");
    assert!(!nodes.join("_temporary").exists(), "the ended run's temporary files are left: {shown}");
    assert!(shown.contains("300 rows"), "only the listed rows are read: {shown}");
    // A reader that stops reading (`inspect ... | head`) ends it quietly, as other tools end.
    let mut child = graphflat()
        .args(["inspect", nodes.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", text(&out));
}

/// A trainer reading records that a flatten replaces (`overwrite`) while it trains: it holds
/// the version it opened (`tables::pin`), reads it in every epoch to its end and exits 0, and
/// the replaced version it held goes at the next command over the output. Ten overwrites under
/// a reader loop (`inspect`, which reads every row group): every read is one run's rows whole,
/// exit 0 (a reader on a store, where nothing is held, exits 75 instead: `tables::files`).
#[test]
fn a_reader_of_a_replaced_output_reads_the_version_it_opened_whole() {
    let dir = scratch("readers-replaced");
    let data = dir.join("graph");
    generate(&data, 3000, 6, 8, 4);
    let flat = dir.join("flat");
    let overwrite = Job::flatten(&data, &flat).key("fanouts", vec![4, 4]).key("overwrite", true).key("part_size_mb", 1);
    let overwrite = overwrite.write(&dir, "overwrite");
    run_ok(&overwrite, &["--workers", "2"]);

    // The trainer, re-reading its records every epoch (no cache).
    let model = dir.join("model");
    let train =
        Job::train(&flat, &model).key("epochs", 200).key("patience", 0).key("cache_mb", 0).key("batch_size", 64);
    let log = dir.join("train.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut trainer = graphflat()
        .args(["run", train.write(&dir, "train").to_str().unwrap()])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let training = || {
        std::fs::read_dir(&model)
            .is_ok_and(|mut d| d.any(|e| e.unwrap().file_name().to_string_lossy().starts_with("metrics-")))
    };
    while !training() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    run_ok(&overwrite, &["--workers", "2"]);
    let still_training = trainer.try_wait().unwrap().is_none();
    let status = trainer.wait().unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status}: {said}");
    assert!(said.contains("epoch 200/200"), "{said}");
    assert!(still_training, "the training ended before the overwrite: make it longer");
    // Nothing has settled the output since the trainer let go of its version.
    assert!(has_kept(&flat), "the version the trainer read was not kept");
    graphflat_ok(&["inspect", flat.to_str().unwrap()]);
    assert!(!has_kept(&flat), "the kept version goes once its reader ended");

    // Ten overwrites under a reader loop.
    let writer = std::thread::spawn(move || {
        for _ in 0..10 {
            run_ok(&overwrite, &["--workers", "2"]);
        }
    });
    let mut whole = 0;
    while !writer.is_finished() {
        let read = graphflat().args(["inspect", flat.to_str().unwrap()]).output().unwrap();
        assert_eq!(read.status.code(), Some(0), "a read of an output being replaced: {}", text(&read));
        assert!(text(&read).contains(": 3000 rows in"), "{}", text(&read));
        whole += 1;
    }
    writer.join().unwrap();
    eprintln!("reads during 10 overwrites: {whole}, each one version whole");
    assert!(whole > 0);
    assert_every_reader_reads_the_manifest(&[&flat]);
}

/// Whether a replaced version of `out` is kept beside it for a reader.
fn has_kept(out: &Path) -> bool {
    let name = format!(".{}.graphflat-", out.file_name().unwrap().to_string_lossy());
    std::fs::read_dir(out.parent().unwrap()).unwrap().any(|e| {
        let file = e.unwrap().file_name().to_string_lossy().into_owned();
        file.starts_with(&name) && file.ends_with(".kept")
    })
}
