//! Multi-label data (PPI-style `list<float32>` targets) end to end: records carry each root's
//! targets, and training with binary cross-entropy is scored by micro-F1 and learns.

use std::collections::HashMap;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, FixedSizeListArray};

/// Each labeled node's targets from a table's `label` column (list or fixed-size list), by id.
fn targets(dir: &std::path::Path, id_column: &str) -> HashMap<i64, Vec<f32>> {
    let mut out = HashMap::new();
    for batch in read_batches(dir) {
        let ids = batch.column_by_name(id_column).unwrap().as_primitive::<Int64Type>();
        let labels = batch.column_by_name("label").unwrap();
        for row in 0..batch.num_rows() {
            if labels.is_null(row) {
                continue;
            }
            let values = match labels.as_fixed_size_list_opt() {
                Some(fixed) => FixedSizeListArray::value(fixed, row),
                None => labels.as_list::<i32>().value(row),
            };
            out.insert(ids.value(row), values.as_primitive::<Float32Type>().values().to_vec());
        }
    }
    out
}

#[test]
fn records_carry_each_roots_targets() {
    let dir = scratch("multilabel-records");
    let data = dir.join("graph");
    graphflat_ok(&[
        "generate",
        "--out",
        data.to_str().unwrap(),
        "--nodes",
        "400",
        "--classes",
        "5",
        "--feature-dim",
        "4",
        "--multi-label",
    ]);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("hops", 1));

    let nodes = targets(&data.join("nodes"), "node_id");
    let records = targets(&flat, "root_id");
    assert_eq!(nodes.len(), 400);
    assert_eq!(records, nodes, "every record holds its root's targets");
    // The generator's targets: the community, and for even communities the next one.
    assert!(nodes.values().all(|t| t.len() == 5 && (1.0..=2.0).contains(&t.iter().sum::<f32>())));
    let inspect = graphflat_ok(&["inspect", flat.to_str().unwrap()]);
    assert!(inspect.contains("targets:5"), "{inspect}");
}

#[test]
fn training_on_targets_reports_and_learns_micro_f1() {
    let dir = scratch("multilabel-train");
    let data = dir.join("graph");
    graphflat_ok(&[
        "generate",
        "--out",
        data.to_str().unwrap(),
        "--nodes",
        "2000",
        "--feature-dim",
        "16",
        "--multi-label",
    ]);
    let (flat, model) = (dir.join("flat"), dir.join("model"));
    let train =
        Job::train(&flat, &model).key("model", "sage").key("hidden", 32).key("epochs", 40).key("batch_size", 256);
    let job = Job::flatten(&data, &flat).key("hops", 2).key("fanouts", vec![10, 10]).and(train);
    let out = run_ok(&job.write(&dir, "job"), &["--workers", "2"]);
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(rows.iter().all(|r| r["metric"] == "micro_f1"), "{text}");
    let (first, last) = (&rows[0], rows.last().unwrap());
    let f1 = last["test_micro_f1"].as_f64().unwrap();
    eprintln!("multi-label test micro-F1 after 40 epochs: {f1:.3}\n{out}");
    assert!(last["train_loss"].as_f64().unwrap() < first["train_loss"].as_f64().unwrap() * 0.5, "{text}");
    // Predicting every target on would score about 0.3 here, none 0.
    assert!(f1 > 0.8, "test micro-F1 {f1}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model_file(&model, ".json")).unwrap()).unwrap();
    assert_eq!(meta["spec"]["multi_label"], true);
    assert_eq!(meta["spec"]["classes"], 8);
}
