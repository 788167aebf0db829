//! A peer process that stops without dying (SIGSTOP, as a hung machine or a network cut without
//! a reset would) ends the job on every other process within `[cluster] peer_timeout_s`, while
//! busy peers are never judged gone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Two processes of one worker training on `records` into `dir/model-<name>`.
fn two_process_job(dir: &Path, name: &str, records: &Path, epochs: usize, peer_timeout_s: u64) -> PathBuf {
    Job::loopback(2)
        .key("peer_timeout_s", peer_timeout_s as i64)
        .and(Job::train(records, dir.join(format!("model-{name}"))).key("epochs", epochs as i64).key("batch_size", 64))
        .write(dir, name)
}

fn spawn(job: &Path, process: usize) -> Child {
    graphflat()
        .env_remove("RUST_BACKTRACE")
        .args(["run", job.to_str().unwrap(), "--process", &process.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, name: &str) {
    assert!(Command::new("kill").args([name, &child.id().to_string()]).status().unwrap().success());
}

/// Kills and reaps a child a failing test leaves behind (a stopped one included).
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_stopped_peer_ends_the_job_within_peer_timeout_and_busy_peers_are_not_judged_gone() {
    let dir = scratch("liveness");
    let data = dir.join("graph");
    generate(&data, 600, 6, 8, 2);
    let flat = flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![4, 3]));

    // Two processes on two shared cores with a 2 s bound: busy, never silent.
    let quick = two_process_job(&dir, "quick", &flat, 20, 2);
    let (a, b) = (spawn(&quick, 0), spawn(&quick, 1));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a busy peer was judged gone:\n{}", text(&out));
    }

    let long = two_process_job(&dir, "long", &flat, 100_000, 3);
    let survivor = spawn(&long, 0);
    let mut victim = Reaped(Some(spawn(&long, 1)));
    std::thread::sleep(Duration::from_secs(4));
    signal(victim.0.as_ref().unwrap(), "-STOP");
    let stopped = Instant::now();
    let out = survivor.wait_with_output().unwrap();
    // 3 s of silence, then the workers' grace; far below "forever".
    assert!(stopped.elapsed() < Duration::from_secs(20), "took {:?}", stopped.elapsed());
    assert_fails(&out, 75, &["lost a peer process", "process 1", "peer_timeout_s"]);

    // Resumed, the stopped process finds its peer gone and ends too, with no model.
    let victim_child = victim.0.take().unwrap();
    signal(&victim_child, "-CONT");
    let resumed = Instant::now();
    let out = victim_child.wait_with_output().unwrap();
    assert!(resumed.elapsed() < Duration::from_secs(20), "took {:?}", resumed.elapsed());
    assert_fails(&out, 75, &["lost a peer process"]);
    assert!(!has_weights(&dir.join("model-long")));
    assert!(model_file(&dir.join("model-quick"), ".bpk").exists());
}

/// A peer killed while the survivor's workers are busy in round 0 or in the rounds after it
/// (whose channels then panic again as they drop) ends the survivor with 75 and its message,
/// never with an abort (SIGABRT, 134, "non-unwinding panic"). Where a kill lands is a race, so
/// twelve moments: without the panic hook's wait, each of three runs of this test had an abort.
#[test]
fn a_peer_killed_at_any_moment_ends_the_survivor_with_75_never_an_abort() {
    let dir = scratch("liveness-kill");
    let data = dir.join("graph");
    generate(&data, 100_000, 10, 32, 1);
    for (i, millis) in (500..=1600).step_by(100).enumerate() {
        let out = dir.join(format!("parts-{i}"));
        let job = Job::loopback(2).key("workers", 2).and(
            Job::table_named("partition")
                .key("nodes", location(data.join("nodes")))
                .key("edges", location(data.join("edges")))
                .key("output", location(&out)),
        );
        let job = job.write(&dir, &format!("kill-{i}"));
        let survivor = spawn(&job, 0);
        let mut victim = Reaped(Some(spawn(&job, 1)));
        std::thread::sleep(Duration::from_millis(millis as u64));
        signal(victim.0.as_ref().unwrap(), "-KILL");
        let result = survivor.wait_with_output().unwrap();
        let _ = victim.0.take().map(|mut c| c.wait());
        if result.status.success() {
            continue; // the job ended before the kill
        }
        assert_fails(&result, 75, &["lost a peer process"]);
        assert!(!text(&result).contains("non-unwinding"), "{}", text(&result));
        assert!(!out.join("_SUCCESS").exists());
    }
}
