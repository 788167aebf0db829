//! The job files in jobs/ run as they are, from a working directory of their own, the way the
//! README runs them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn jobs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs")
}

fn run_in(cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_graphflat")).args(args).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "graphflat {args:?} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_job_file_parses() {
    let mut count = 0;
    for entry in std::fs::read_dir(jobs_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            schemas::JobFile::parse(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            count += 1;
        }
    }
    assert!(count >= 3);
}

#[test]
fn quickstart_then_two_processes_give_the_same_records() {
    let cwd = scratch("quickstart");
    let quickstart = jobs_dir().join("quickstart.toml");
    let summary = run_in(&cwd, &["run", quickstart.to_str().unwrap()]);
    assert!(summary.contains("10000 targets"), "{summary}");
    let single = read_records(&cwd.join("data/quickstart/flat"));
    assert_eq!(single.len(), 10_000);
    // A second run finds the graph generated and flattens again to the same records.
    run_in(&cwd, &["run", quickstart.to_str().unwrap()]);
    assert!(single == read_records(&cwd.join("data/quickstart/flat")));

    run_two_processes(&jobs_dir().join("two-processes.toml"), &cwd);
    assert!(single == read_records(&cwd.join("data/quickstart/flat-2p")));
}

#[test]
fn cora_job_runs_after_import() {
    let Some(cora) = cora() else { return };
    let cwd = scratch("cora-job");
    run_in(&cwd, &["import", "ogb", cora.to_str().unwrap(), "--out", "data/cora"]);
    let summary = run_in(&cwd, &["run", jobs_dir().join("cora.toml").to_str().unwrap()]);
    assert!(summary.contains("2708 targets"), "{summary}");
    let inspected = run_in(&cwd, &["inspect", "data/cora/flat"]);
    assert!(inspected.contains("2708 rows") && inspected.contains("_SUCCESS present"), "{inspected}");
}

#[test]
fn multilabel_job_trains_on_targets() {
    let cwd = scratch("multilabel-job");
    let summary = run_in(&cwd, &["run", jobs_dir().join("multilabel.toml").to_str().unwrap()]);
    assert!(summary.contains("best validation micro_f1"), "{summary}");
    let inspected = run_in(&cwd, &["inspect", "data/multilabel/flat"]);
    assert!(inspected.contains("graphflat.label = targets:8"), "{inspected}");
}
