//! Helpers for the end-to-end tests: they drive the `graphflat` binary as a user would, with
//! job files built by `Job`, and read its output back with the parquet crate's Arrow reader. Each test
//! file uses some of them.
#![allow(dead_code, unused_imports)]

mod fake_links;
mod jobs;
mod readers;
mod records;
mod scores;
mod tables;
pub mod typed;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use fake_links::{LinkSettings, link_set, pair_split, write_edges, write_link_set};
pub use jobs::{Job, location, loopback_hosts, write_job};
pub use readers::{
    assert_every_reader_reads_the_manifest, assert_every_reader_reads_the_manifest_with, python, read_with_every_reader,
};
pub use records::{
    Record, committed, edit_manifest, global_edges, has_weights, manifest, manifest_of, model_file, read_links,
    read_listed_records, read_records,
};
pub use scores::{Scored, max_difference, read_scores, record_scores, scores_only};
pub use tables::{
    Graph, batches_in, id_text, message_passing_edges, parquet_files, read_batches, read_column_i64, read_graph,
    sorted_rows, write_parquet,
};

/// How long `run` waits for a job before it fails the test as hung.
const HANG: Duration = Duration::from_secs(120);

pub fn graphflat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_graphflat"))
}

/// A fresh directory for one test, removed when the test passes and kept when it fails (a
/// panicking thread), so that a run leaves nothing behind but what a failure needs to be read.
/// `GRAPHFLAT_KEEP_SCRATCH=1` keeps every one (a benchmark reading a test's outputs).
pub struct Scratch(PathBuf);

/// A fresh [`Scratch`] directory under cargo's target temporary directory, named after the
/// test, the process and a counter (tests run in parallel threads of one process).
pub fn scratch(name: &str) -> Scratch {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for the failed test: {}", self.0.display());
        } else if std::env::var_os("GRAPHFLAT_KEEP_SCRATCH").is_none() {
            // Tests make files read-only or unreadable on purpose; a leftover is only disk.
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A process's stdout then stderr, as text.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs `graphflat args...` (any command); panics with its output if it fails. Returns stdout.
pub fn graphflat_ok(args: &[&str]) -> String {
    graphflat_ok_in(Path::new("."), args)
}

/// The same in the working directory `cwd`.
pub fn graphflat_ok_in(cwd: &Path, args: &[&str]) -> String {
    let out = graphflat().args(args).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "graphflat {args:?} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `graphflat run job args...` and expects success; panics with its output otherwise.
/// Returns stdout (the run's summary).
pub fn run_ok(job: &Path, args: &[&str]) -> String {
    graphflat_ok(&[&["run", job.to_str().unwrap()], args].concat())
}

/// Runs `graphflat run job args...` to its end, whatever its exit, bounded by `HANG` (a hang
/// fails the test), without `RUST_BACKTRACE` (as a user runs it). Returns its output.
pub fn run(job: &Path, args: &[&str]) -> Output {
    bounded(&[&["run", job.to_str().unwrap()], args].concat())
}

/// Runs `graphflat args...` as [`run`] does: to its end, bounded by `HANG`.
pub fn bounded(args: &[&str]) -> Output {
    let child = graphflat()
        .env_remove("RUST_BACKTRACE")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output().unwrap()));
    finished.recv_timeout(HANG).unwrap_or_else(|_| {
        // Not yet waited for, so the id is still the child's.
        Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        panic!("graphflat {} hung", args.join(" "))
    })
}

/// Flattens `data` into `dir/<name>` (job file `dir/<name>.toml`) with the `[flatten]` keys that
/// `settings` sets and the command-line `args`; panics with its output unless it succeeds.
/// Returns the output directory.
pub fn flatten(dir: &Path, data: &Path, name: &str, args: &[&str], settings: impl FnOnce(Job) -> Job) -> PathBuf {
    let out = dir.join(name);
    run_ok(&settings(Job::flatten(data, &out)).write(dir, name), args);
    out
}

/// How many hubs a flatten run's summary says it re-indexed.
pub fn hubs_reindexed(summary: &str) -> u64 {
    let line = summary.lines().find(|l| l.contains("hubs re-indexed")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "hubs").unwrap();
    words[i - 1].parse().unwrap()
}

/// A generated graph (`dir/generated`) with its edges split by `split-edges` (10% valid, 10%
/// test, both directions of an edge in one split, seed 3): `dir/data`, holding `nodes` (a
/// link to the generated one) and `edges`.
pub fn split_graph(dir: &Path, nodes: u64, avg_degree: u64, dim: usize, seed: u64) -> PathBuf {
    let generated = dir.join("generated");
    generate(&generated, nodes, avg_degree, dim, seed);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(generated.join("nodes"), data.join("nodes")).unwrap();
    let (edges, out) = (generated.join("edges"), data.join("edges"));
    let (edges, out) = (edges.to_str().unwrap(), out.to_str().unwrap());
    let split = ["--valid", "0.1", "--test", "0.1", "--seed", "3", "--undirected"];
    graphflat_ok(&[&["split-edges", "--edges", edges, "--out", out][..], &split[..]].concat());
    data
}

/// GraphInfer's `embedding` column by node id.
pub fn read_embeddings(dir: &Path) -> std::collections::BTreeMap<i64, Vec<f32>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Int64Type};
    let mut out = std::collections::BTreeMap::new();
    for batch in read_batches(dir) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let rows = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        for r in 0..batch.num_rows() {
            out.insert(ids.value(r), rows.value(r).as_primitive::<Float32Type>().values().to_vec());
        }
    }
    out
}

/// Generates a graph with `graphflat generate` into `dir`.
pub fn generate(dir: &Path, nodes: u64, avg_degree: u64, dim: usize, seed: u64) {
    let args = generate_args(dir.to_str().unwrap(), nodes, avg_degree, dim, seed);
    graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The arguments of `graphflat generate` into `out` (a path or a URI).
pub fn generate_args(out: &str, nodes: u64, avg_degree: u64, dim: usize, seed: u64) -> Vec<String> {
    let (nodes, avg_degree, dim, seed) = (nodes.to_string(), avg_degree.to_string(), dim.to_string(), seed.to_string());
    ["generate", "--out", out, "--nodes", &nodes, "--avg-degree", &avg_degree, "--feature-dim", &dim, "--seed", &seed]
        .map(String::from)
        .to_vec()
}

/// `../shared/data/cora`, or `None` (with a note on stderr) when it is absent.
pub fn cora() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cora");
    if dir.join("raw/edge.csv.gz").exists() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: real Cora not found at {} (it lives in the shared data folder beside the repository)",
            dir.display()
        );
        None
    }
}

/// `text` gzipped, as OGB ships its CSV files.
pub fn gzip(text: &str) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

/// A free loopback port (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `graphflat run job --process p` for every process of a two-process job, in `cwd`, and
/// waits for both; returns each one's output, and panics with it if one fails.
pub fn run_two_processes(job: &Path, cwd: &Path) -> Vec<String> {
    let children: Vec<_> = (0..2)
        .map(|p| {
            graphflat()
                .args(["run", job.to_str().unwrap(), "--process", &p.to_string()])
                .current_dir(cwd)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs = children.into_iter().map(|child| child.wait_with_output().unwrap());
    outputs
        .map(|out| {
            assert!(out.status.success(), "a process failed:\n{}", text(&out));
            text(&out)
        })
        .collect()
}

/// `out` failed with exit `code`, says each of `words`, and shows no panic report.
pub fn assert_fails(out: &Output, code: i32, words: &[&str]) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(code), "expected exit {code}:\n{all}");
    for w in words {
        assert!(all.contains(w), "expected {w:?} in:\n{all}");
    }
    assert!(!all.contains("panicked") && !all.contains("RUST_BACKTRACE"), "a panic report leaked:\n{all}");
}

/// The `error:` line of a failed run says each thing once: no link of its chain (the text
/// between `: `) of 20 characters or more appears twice (errors that print their sources
/// inside their own message, `object_store`'s among them, would repeat them).
pub fn assert_no_repeats(out: &Output) {
    let all = text(out);
    let line = all.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line:\n{all}"));
    let mut seen = std::collections::HashSet::new();
    for link in line.split(": ").filter(|l| l.len() >= 20) {
        assert!(seen.insert(link), "{link:?} repeated in:\n{line}");
    }
}

/// The I/O of a job with the default `[storage]`, for tests that call the libraries directly.
pub fn local_io() -> std::sync::Arc<::tables::Io> {
    ::tables::Io::new(&schemas::StorageConfig::default()).unwrap()
}

/// Test accuracy from a training run's log line "test accuracy there ...".
pub fn test_accuracy(stdout: &str) -> f64 {
    let line = stdout.lines().find(|l| l.contains("test accuracy there")).unwrap_or_else(|| panic!("{stdout}"));
    let after = line.split("test accuracy there").nth(1).unwrap();
    let number: String =
        after.chars().skip_while(|c| !c.is_ascii_digit()).take_while(|c| *c == '.' || c.is_ascii_digit()).collect();
    number.parse().unwrap_or_else(|_| panic!("no accuracy in {line:?}"))
}

/// The one model description (`model-<run>.json`) in a model directory.
pub fn model_json(model: &Path) -> std::path::PathBuf {
    let names = std::fs::read_dir(model).unwrap().map(|e| e.unwrap().path());
    let mut described: Vec<_> = names
        .filter(|p| {
            p.file_name().unwrap().to_string_lossy().starts_with("model-") && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    assert_eq!(described.len(), 1, "one description in {}", model.display());
    described.remove(0)
}
