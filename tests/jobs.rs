//! The job files in jobs/ run as they are, from a working directory of their own, the way the
//! README runs them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

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
    let test = test_accuracy(&summary);
    assert!(test > 0.75, "the paper's GCN reaches about 0.81 on Cora; this one {test}\n{summary}");

    // And Cora's 8 parts (tests/partition.rs holds their cut to METIS's), then the records again
    // with those parts as owners: the same records.
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("partition.toml").to_str().unwrap()]);
    assert!(summary.contains("parts:        8") && summary.contains("edge cut:"), "{summary}");
    assert!(summary.contains("exchanged:"), "{summary}");
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/cora/parts"]);
    assert!(inspected.contains("2708 rows") && inspected.contains("_SUCCESS present"), "{inspected}");
    assert!(read_records(&cwd.join("data/cora/flat")) == read_records(&cwd.join("data/cora/flat-parts")));

    // The same GCN trained on the graph itself (no records), then scored by GraphInfer.
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("cora-full.toml").to_str().unwrap()]);
    assert!(summary.contains("scored:       2708 nodes"), "{summary}");
    let test = test_accuracy(&summary);
    assert!(test > 0.75, "the paper's GCN reaches about 0.81 on Cora; full-graph training {test}\n{summary}");
    // And with its first layer precomputed: Â X, records of one hop, a dense first layer.
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("precompute-cora.toml").to_str().unwrap()]);
    assert!(summary.contains("Â X over 10556 in-edges") && summary.contains("scored:       2708 nodes"), "{summary}");
    let test = test_accuracy(&summary);
    assert!(test > 0.75, "the paper's GCN reaches about 0.81 on Cora; over Â X {test}\n{summary}");
    // And over that Â X, control variates: 2 in-edges a node each epoch.
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("control-variates-cora.toml").to_str().unwrap()]);
    assert!(summary.contains("control variates: 2708 nodes' histories"), "{summary}");
    assert!(summary.contains("scored:       2708 nodes"), "{summary}");
    let test = test_accuracy(&summary);
    assert!(test > 0.75, "the paper's GCN reaches about 0.81 on Cora; with control variates {test}\n{summary}");
}

#[test]
fn hetero_job_runs_all_three_stages_on_a_typed_graph() {
    let cwd = scratch("hetero-job");
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("hetero.toml").to_str().unwrap()]);
    assert!(summary.contains("18000 targets"), "one record per user: {summary}");
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/hetero/flat"]);
    assert!(inspected.contains("graphflat.node_types = item:16,shop:8,user:32"), "{inspected}");
    assert!(inspected.contains("graphflat.target_type = user"), "{inspected}");
    // Users' classes show only through their items' relations: R-GCN reads them.
    let test = test_accuracy(&summary);
    assert!(test > 0.9, "R-GCN on the typed graph: test accuracy {test}\n{summary}");
    let model = graphflat_ok_in(&cwd, &["inspect", "data/hetero/model"]);
    assert!(model.contains("a rgcn model of a typed graph (types item:16,shop:8,user:32"), "{model}");
    // GraphInfer: a row for every node of every type; the users' predictions as good as training's.
    assert!(summary.contains("scored:       30000 nodes"), "{summary}");
    let (mut predicted, mut labels) = (BTreeMap::new(), BTreeMap::new());
    for batch in read_batches(&cwd.join("data/hetero/scores")) {
        let types = batch.column_by_name("node_type").unwrap().as_string::<i32>();
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let prediction = batch.column_by_name("prediction").unwrap().as_primitive::<Int64Type>();
        for r in (0..batch.num_rows()).filter(|&r| types.value(r) == "user") {
            predicted.insert(ids.value(r), prediction.value(r));
        }
    }
    for batch in read_batches(&cwd.join("data/hetero/nodes/user")) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let label = batch.column_by_name("label").unwrap().as_primitive::<Int64Type>();
        let split = batch.column_by_name("split").unwrap().as_string::<i32>();
        for r in (0..batch.num_rows()).filter(|&r| split.value(r) == "test") {
            labels.insert(ids.value(r), label.value(r));
        }
    }
    let hits = labels.iter().filter(|(id, label)| predicted[id] == **label).count();
    let accuracy = hits as f64 / labels.len() as f64;
    assert!(accuracy > 0.9, "GraphInfer's test accuracy on users: {accuracy}");
}

#[test]
fn user_item_job_learns_rows_for_featureless_users() {
    let cwd = scratch("user-item-job");
    let summary = graphflat_ok_in(&cwd, &["run", jobs_dir().join("user-item.toml").to_str().unwrap()]);
    let inspected = graphflat_ok_in(&cwd, &["inspect", "data/user-item/flat"]);
    assert!(inspected.contains("graphflat.node_types = item:16,shop:8,user:0"), "{inspected}");
    assert!(summary.contains("7200 targets") && summary.contains("learned:      7200 rows of 32"), "{summary}");
    assert!(summary.contains("learned:      0 nodes without a learned row"), "{summary}");
    let test = test_accuracy(&summary);
    assert!(test > 0.9, "R-GCN over featureless users: test accuracy {test}\n{summary}");
    // The table: the users' rows alone, under their type's name.
    let mut users = 0;
    for batch in batches_in(parquet_files(&cwd.join("data/user-item/model/embeddings"))) {
        let types = batch.column_by_name("node_type").unwrap().as_string::<i32>();
        assert!(types.iter().all(|t| t == Some("user")));
        users += batch.num_rows();
    }
    assert_eq!(users, 7200);
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
fn cora_link_job_reaches_the_issue_s_accuracy() {
    // The job file as shipped, on split seed 0: PyG's recipe on the same splits averages 0.907
    // over seeds 0-2, and ours 0.9085 (BENCHMARKS.md, section 13; seed 0 0.8966). One seed: each
    // flattens 7.4 GB of records, and a second took 75 s of CI's 45 minutes. The run is
    // deterministic, so one seed's result is a fixed function of the code, not a draw.
    let Some(cora) = cora() else { return };
    let cwd = scratch("cora-link-job");
    graphflat_ok_in(&cwd, &["import", "ogb", cora.to_str().unwrap(), "--out", "data/cora"]);
    let split = ["split-edges", "--edges", "data/cora/edges", "--out", "data/cora-split", "--valid", "0.05"];
    graphflat_ok_in(&cwd, &[&split[..], &["--test", "0.1", "--seed", "0", "--undirected"]].concat());
    std::fs::copy(jobs_dir().join("cora-link.toml"), cwd.join("job.toml")).unwrap();
    let summary = graphflat_ok_in(&cwd, &["run", "job.toml"]);
    assert!(summary.contains("scored:       2708 nodes"), "{summary}");
    assert!(summary.contains("10556 targets"), "a record per citation: {summary}");
    let auc = test_auc_at_best_validation(&cwd.join("data/cora-link/model/metrics.jsonl"));
    assert!(auc >= 0.89, "test AUC {auc:.4} on split seed 0");
}

#[test]
fn cora_link_full_graph_job_reaches_pyg_s_accuracy_on_two_seeds() {
    // The job file as shipped (seed 0), then with the split and the training seeded 1: PyG's
    // full-batch recipe on the same splits averages 0.912 over seeds 0-2 (BENCHMARKS.md,
    // section 23). GraphInfer embeds every node with the model. Two seeds keep CI's time.
    let Some(cora) = cora() else { return };
    let job = std::fs::read_to_string(jobs_dir().join("cora-link-full.toml")).unwrap();
    let mut aucs = Vec::new();
    for seed in 0..2 {
        let cwd = scratch(&format!("cora-link-full-job-{seed}"));
        graphflat_ok_in(&cwd, &["import", "ogb", cora.to_str().unwrap(), "--out", "data/cora"]);
        let split = ["split-edges", "--edges", "data/cora/edges", "--out", "data/cora-split", "--valid", "0.05"];
        graphflat_ok_in(&cwd, &[&split[..], &["--test", "0.1", "--seed", &seed.to_string(), "--undirected"]].concat());
        let seeded = job.replace("[train]\n", &format!("[train]\nseed = {seed}\n"));
        std::fs::write(cwd.join("job.toml"), if seed == 0 { job.clone() } else { seeded }).unwrap();
        let summary = graphflat_ok_in(&cwd, &["run", "job.toml"]);
        assert!(summary.contains("scored:       2708 nodes"), "{summary}");
        aucs.push(test_auc_at_best_validation(&cwd.join("data/cora-link/model-full/metrics.jsonl")));
    }
    let mean = aucs.iter().sum::<f64>() / 2.0;
    assert!(mean >= 0.90, "mean test AUC {mean:.4} over seeds 0 and 1: {aucs:?}");
}

/// The test AUC of the epoch with the best validation AUC (the model the job keeps).
fn test_auc_at_best_validation(metrics: &Path) -> f64 {
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(metrics).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let auc = |row: &serde_json::Value, key: &str| row[key].as_f64().unwrap();
    // The first of equal bests, as the trainer's tracker keeps it.
    let best =
        rows.iter().fold(&rows[0], |best, r| if auc(r, "valid_auc") > auc(best, "valid_auc") { r } else { best });
    auc(best, "test_auc")
}
