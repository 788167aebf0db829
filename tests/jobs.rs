//! The job files in jobs/ run as they are, from a working directory of their own, the way the
//! README runs them.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn jobs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs")
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
    let summary = graphflat_ok_in(&cwd, &["run", quickstart.to_str().unwrap()]);
    assert!(summary.contains("10000 targets"), "{summary}");
    // All three stages ran: GraphInfer scored every node of the generated graph.
    assert!(summary.contains("scored:       10000 nodes"), "{summary}");
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/quickstart/scores"]);
    assert!(inspected.contains("10000 rows") && inspected.contains("_SUCCESS present"), "{inspected}");
    let single = read_records(&cwd.join("data/quickstart/flat"));
    assert_eq!(single.len(), 10_000);
    // A second run finds the graph generated and flattens again to the same records.
    graphflat_ok_in(&cwd, &["run", quickstart.to_str().unwrap()]);
    assert!(single == read_records(&cwd.join("data/quickstart/flat")));

    run_two_processes(&jobs_dir().join("two-processes.toml"), &cwd);
    assert!(single == read_records(&cwd.join("data/quickstart/flat-2p")));
}

#[test]
fn cora_job_runs_after_import() {
    let Some(cora) = cora() else { return };
    let cwd = scratch("cora-job");
    graphflat_ok_in(&cwd, &["import", "ogb", cora.to_str().unwrap(), "--out", "data/cora"]);
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("cora.toml").to_str().unwrap()]);
    assert!(summary.contains("2708 targets"), "{summary}");
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/cora/flat"]);
    assert!(inspected.contains("2708 rows") && inspected.contains("_SUCCESS present"), "{inspected}");

    // Then the paper's GCN on those records, and GraphInfer over every Cora node.
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("cora-infer.toml").to_str().unwrap()]);
    assert!(summary.contains("scored:       2708 nodes"), "{summary}");
    let test: f64 = summary
        .split("test accuracy there ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(test > 0.75, "the paper's GCN reaches about 0.81 on Cora; this one {test}\n{summary}");
}

#[test]
fn multilabel_job_trains_on_targets() {
    let cwd = scratch("multilabel-job");
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("multilabel.toml").to_str().unwrap()]);
    assert!(summary.contains("best validation micro_f1"), "{summary}");
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/multilabel/flat"]);
    assert!(inspected.contains("graphflat.label = targets:8"), "{inspected}");
    let scores = read_batches(&cwd.join("data/multilabel/scores"));
    let prediction = scores[0].schema().field_with_name("prediction").unwrap().data_type().clone();
    assert_eq!(prediction.to_string(), "FixedSizeList(8 x non-null Boolean)");
    assert_eq!(scores.iter().map(|b| b.num_rows()).sum::<usize>(), 3000);
}

#[test]
fn cora_link_job_runs_after_import_and_split() {
    let Some(cora) = cora() else { return };
    let cwd = scratch("cora-link-job");
    graphflat_ok_in(&cwd, &["import", "ogb", cora.to_str().unwrap(), "--out", "data/cora"]);
    let split = ["split-edges", "--edges", "data/cora/edges", "--out", "data/cora-split", "--valid", "0.05"];
    graphflat_ok_in(&cwd, &[&split[..], &["--test", "0.1", "--seed", "0", "--undirected"]].concat());
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("cora-link.toml").to_str().unwrap()]);
    assert!(summary.contains("10556 targets"), "a record per citation: {summary}");
    assert!(summary.contains("scored:       2708 nodes"), "{summary}");
    let metrics = std::fs::read_to_string(cwd.join("data/cora-link/model/metrics.jsonl")).unwrap();
    let best = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["test_auc"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(best > 0.85, "test AUC {best}:\n{metrics}");
}
