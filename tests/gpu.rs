//! `device = "gpu"` end to end (burn-wgpu; software Vulkan in CI): a GAT trained on the GPU
//! tracks the same job on the CPU, `jobs/gpu.toml` runs, and a build without the feature says
//! how to get one.

use std::path::Path;

use crate::common::*;

/// (first epoch's train loss, last epoch's test accuracy) from `metrics.jsonl`.
#[cfg(feature = "gpu")]
fn loss_and_accuracy(model: &Path) -> (f64, f64) {
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (rows[0]["train_loss"].as_f64().unwrap(), rows.last().unwrap()["test_accuracy"].as_f64().unwrap())
}

/// The job file that flattens `dir/graph` and trains a GAT on `device` into `dir/model-<device>`.
fn gat_on(dir: &Path, device: &str) -> std::path::PathBuf {
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    let flatten = Job::flatten(&data, &flat).key("hops", 2).key("fanouts", vec![5, 5]).key("overwrite", true);
    let train = Job::train(&flat, dir.join(format!("model-{device}"))).key("model", "gat").key("heads", 2);
    let train = train.key("hidden", 8).key("epochs", 20).key("batch_size", 4096).key("device", device);
    flatten.and(train).write(dir, device)
}

#[cfg(feature = "gpu")]
#[test]
fn training_on_the_gpu_tracks_the_cpu() {
    let dir = scratch("gpu-train");
    generate(&dir.join("graph"), 1500, 8, 16, 3);
    let mut results = Vec::new();
    for device in ["cpu", "gpu"] {
        let out = run_ok(&gat_on(&dir, device), &[]);
        results.push(loss_and_accuracy(&dir.join(format!("model-{device}"))));
        eprintln!("{device}: {:?}\n{out}", results.last().unwrap());
    }
    let ((cpu_loss, cpu_acc), (gpu_loss, gpu_acc)) = (results[0], results[1]);
    // One step per epoch (the batch holds every training record): the first epoch's loss is
    // the initial model's, with the same weights, batch and dropout masks on both devices, so it
    // agrees to float rounding. Adam then amplifies rounding differences in near-zero
    // gradients, so later epochs agree closely but not exactly.
    assert!((cpu_loss - gpu_loss).abs() < 1e-4 * cpu_loss.abs().max(1.0), "loss {cpu_loss} vs {gpu_loss}");
    assert!((cpu_acc - gpu_acc).abs() < 0.05, "test accuracy {cpu_acc} vs {gpu_acc}");
    assert!(gpu_acc > 0.5, "the GPU run learned nothing: {gpu_acc}");
}

/// The example GPU job runs as it is.
#[cfg(feature = "gpu")]
#[test]
fn the_gpu_job_file_runs() {
    let cwd = scratch("gpu-job");
    let job = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/gpu.toml");
    let out = graphflat().args(["run", job.to_str().unwrap()]).current_dir(&cwd).output().unwrap();
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    let (_, accuracy) = loss_and_accuracy(&cwd.join("data/gpu/model"));
    assert!(accuracy > 0.5, "test accuracy {accuracy}\n{message}");
}

#[cfg(not(feature = "gpu"))]
#[test]
fn a_build_without_the_gpu_feature_says_how_to_get_one() {
    let dir = scratch("gpu-missing");
    generate(&dir.join("graph"), 200, 4, 4, 3);
    let out = run(&gat_on(&dir, "gpu"), &[]);
    assert!(!out.status.success());
    let message = text(&out);
    assert!(message.contains("--features gpu"), "{message}");
}
