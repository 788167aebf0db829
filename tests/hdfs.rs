//! `hdfs://` paths. With the `hdfs` feature: the whole pipeline against the namenode that
//! `GRAPHFLAT_TEST_HDFS` names (`hdfs://host:port`; skipped with a message without one; no HDFS
//! server can be installed where this project is built), and an unreachable namenode is a clear
//! error in bounded time. Without the feature: a usage error that says how to build it.

use crate::common::*;

#[cfg(not(feature = "hdfs"))]
#[test]
fn without_the_feature_an_hdfs_path_says_how_to_build_one() {
    let dir = scratch("hdfs-missing");
    let out = run(&Job::flatten("hdfs://namenode:9000/g", dir.join("flat")).write(&dir, "hdfs"), &[]);
    assert_fails(&out, 64, &["hdfs://namenode:9000/g/nodes", "--features hdfs"]);
}

#[cfg(feature = "hdfs")]
#[test]
fn an_unreachable_namenode_is_a_clear_error_in_bounded_time() {
    use std::time::{Duration, Instant};
    let dir = scratch("hdfs-unreachable");
    let port = free_port();
    let data = format!("hdfs://127.0.0.1:{port}/g");
    let started = Instant::now();
    let job = Job::storage().key("retries", 2).key("timeout_s", 2).and(Job::flatten(&data, dir.join("flat")));
    let out = run(&job.write(&dir, "hdfs"), &[]);
    let message = text(&out);
    assert_eq!(out.status.code(), Some(75), "{message}");
    // Two failover attempts with hdfs-native's backoff (from 500 ms): seconds, not minutes.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}\n{message}", started.elapsed());
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("panicked"), "{message}");
}

/// Every object under `dir` on HDFS, copied into `to` (file names only).
#[cfg(feature = "hdfs")]
fn download(dir: &str, to: &std::path::Path) {
    let io = tables::Io::new(&schemas::StorageConfig::default()).unwrap();
    let place = io.place(dir).unwrap();
    std::fs::create_dir_all(to).unwrap();
    for file in io.block_on(place.list_files()).unwrap() {
        let name = file.location.filename().unwrap().to_owned();
        let bytes = io.block_on(place.child(&name).get()).unwrap().unwrap();
        std::fs::write(to.join(name), bytes).unwrap();
    }
}

#[cfg(feature = "hdfs")]
#[test]
fn the_pipeline_on_hdfs_equals_the_pipeline_on_disk() {
    let Ok(namenode) = std::env::var("GRAPHFLAT_TEST_HDFS") else {
        eprintln!("SKIPPED: set GRAPHFLAT_TEST_HDFS=hdfs://host:port to run the pipeline against a namenode");
        return;
    };
    let dir = scratch("hdfs-pipeline");
    let root = format!("{}/graphflat-test-{}", namenode.trim_end_matches('/'), std::process::id());
    let local = dir.join("local");
    generate(&local, 2000, 6, 8, 2);
    let args = generate_args(&format!("{root}/g"), 2000, 6, 8, 2);
    let generated = graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(generated.contains("2000 nodes"), "{generated}");
    let stages = |data: &str, out: &str| {
        let (flat, model) = (format!("{out}/flat"), format!("{out}/model"));
        Job::flatten(data, &flat)
            .key("fanouts", vec![5, 3])
            .and(Job::train(&flat, &model).key("epochs", 2))
            .and(Job::infer(data, &model, format!("{out}/scores")))
    };
    run_ok(&stages(&local.display().to_string(), &dir.display().to_string()).write(&dir, "local"), &[]);
    run_ok(&stages(&format!("{root}/g"), &root).write(&dir, "hdfs"), &[]);

    for name in ["flat", "model", "scores"] {
        download(&format!("{root}/{name}"), &dir.join(format!("{name}-hdfs")));
    }
    assert!(read_records(&dir.join("flat")) == read_records(&dir.join("flat-hdfs")), "records differ");
    assert!(
        std::fs::read(model_file(&dir.join("model"), ".bpk")).unwrap()
            == std::fs::read(model_file(&dir.join("model-hdfs"), ".bpk")).unwrap()
    );
    assert_eq!(sorted_rows(&read_batches(&dir.join("scores"))), sorted_rows(&read_batches(&dir.join("scores-hdfs"))));
}
