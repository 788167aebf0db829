//! Helpers for the end-to-end tests: they drive the `graphflat` binary as a user would and
//! read its output back with the parquet crate's Arrow reader.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub fn graphflat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_graphflat"))
}

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `graphflat args...`; panics with its output if it fails.
pub fn run_ok(args: &[&str]) -> String {
    let out = graphflat().args(args).output().unwrap();
    assert!(out.status.success(), "graphflat {args:?} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Writes a job file into `dir` and returns its path.
pub fn job(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// The job file for a flatten of `data/{nodes,edges}` into `out`, with extra `[flatten]` keys.
pub fn flatten_job(data: &Path, out: &Path, extra: &str) -> String {
    format!(
        "[flatten]\nnodes = {:?}\nedges = {:?}\noutput = {:?}\n{extra}\n",
        data.join("nodes").display().to_string(),
        data.join("edges").display().to_string(),
        out.display().to_string()
    )
}

/// Generates a graph with `graphflat generate` into `dir`.
pub fn generate(dir: &Path, nodes: u64, avg_degree: u64, dim: usize, seed: u64) {
    run_ok(&[
        "generate",
        "--out",
        dir.to_str().unwrap(),
        "--nodes",
        &nodes.to_string(),
        "--avg-degree",
        &avg_degree.to_string(),
        "--feature-dim",
        &dim.to_string(),
        "--seed",
        &seed.to_string(),
    ]);
}

/// One record as the tests see it: the contract's own type (the BFS the tests check it against
/// stays independent).
pub type Row = schemas::Record;

/// A record's edges by global ids: (src, dst, weight bits, layers), sorted.
pub fn global_edges(r: &Row) -> Vec<(i64, i64, u32, u32)> {
    let mut e: Vec<_> = (0..r.num_edges())
        .map(|i| {
            (
                r.node_ids[r.edge_src[i] as usize],
                r.node_ids[r.edge_dst[i] as usize],
                r.edge_weights[i].to_bits(),
                r.edge_layers[i],
            )
        })
        .collect();
    e.sort();
    e
}

/// Every `*.parquet` file under `dir`, in name order.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

/// Reads every batch of every part file with parquet's Arrow reader.
pub fn read_batches(dir: &Path) -> Vec<RecordBatch> {
    assert!(dir.join("_SUCCESS").exists(), "{} has no _SUCCESS", dir.display());
    parquet_files(dir)
        .into_iter()
        .flat_map(|path| {
            let file = std::fs::File::open(&path).unwrap();
            ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap().map(|b| b.unwrap())
        })
        .collect()
}

/// Every record of a flatten output, sorted by root id.
pub fn read_records(dir: &Path) -> Vec<Row> {
    let mut rows: Vec<Row> = read_batches(dir)
        .iter()
        .flat_map(|b| schemas::record::from_batch(b, &dir.display().to_string(), 0).unwrap())
        .collect();
    rows.sort_by_key(|r| r.root);
    rows
}

/// The node and edge tables as plain maps, read with parquet's Arrow reader.
pub struct Graph {
    pub features: BTreeMap<i64, Vec<f32>>,
    pub labels: BTreeMap<i64, Option<i64>>,
    /// (src, dst, weight) in table order.
    pub edges: Vec<(i64, i64, f32)>,
}

pub fn read_graph(data: &Path) -> Graph {
    let mut g = Graph { features: BTreeMap::new(), labels: BTreeMap::new(), edges: Vec::new() };
    for batch in read_batches(&data.join("nodes")) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let labels = batch.column_by_name("label").unwrap().as_primitive::<Int64Type>();
        let features = batch.column_by_name("features").unwrap().as_list::<i32>();
        for r in 0..batch.num_rows() {
            g.features.insert(ids.value(r), features.value(r).as_primitive::<Float32Type>().values().to_vec());
            g.labels.insert(ids.value(r), labels.is_valid(r).then(|| labels.value(r)));
        }
    }
    for batch in read_batches(&data.join("edges")) {
        let src = batch.column_by_name("src").unwrap().as_primitive::<Int64Type>();
        let dst = batch.column_by_name("dst").unwrap().as_primitive::<Int64Type>();
        let w = batch.column_by_name("weight").unwrap().as_primitive::<Float32Type>();
        for r in 0..batch.num_rows() {
            g.edges.push((src.value(r), dst.value(r), w.value(r)));
        }
    }
    g
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

/// A free loopback port (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `graphflat run job --process p` for every process of a two-process job, in `cwd`, and
/// waits for both; panics with a process's output if it fails.
pub fn run_two_processes(job: &Path, cwd: &Path) {
    let children: Vec<_> = (0..2)
        .map(|p| {
            graphflat()
                .args(["run", job.to_str().unwrap(), "--process", &p.to_string()])
                .current_dir(cwd)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a process failed:\n{}", text(&out));
    }
}

/// Every row of a table as text, sorted (part boundaries differ from run to run).
pub fn sorted_rows(batches: &[arrow_array::RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(move |r| b.columns().iter().map(|c| format!("{:?}", c.slice(r, 1))).collect::<Vec<_>>().join("|"))
        })
        .collect();
    rows.sort();
    rows
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

/// The I/O of a job with the default `[storage]`, for tests that call the libraries directly.
pub fn local_io() -> std::sync::Arc<tables::Io> {
    tables::Io::new(&schemas::StorageConfig::default()).unwrap()
}
