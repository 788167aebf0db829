//! A failing worker ends every worker of the job, in bounded time, with that failure.

use std::time::{Duration, Instant};

use cluster::{Failure, execute};
use schemas::ClusterConfig;

fn threads(n: usize) -> ClusterConfig {
    ClusterConfig { workers: n, ..ClusterConfig::default() }
}

/// Worker 1 fails while worker 0 waits for it in a collective: the job ends with worker 1's
/// failure instead of hanging.
fn fail_one(failing: fn() -> Result<u64, String>) -> (Result<Vec<u64>, Failure<String>>, Duration) {
    let started = Instant::now();
    let result = execute(&threads(3), move |worker| {
        if worker.index() == 1 {
            failing()?;
        }
        Ok(cluster::sum(worker, 1))
    });
    (result, started.elapsed())
}

#[test]
fn an_error_on_one_worker_ends_all_of_them() {
    let (result, took) = fail_one(|| Err("bad row".into()));
    assert!(matches!(result, Err(Failure::Worker(ref e)) if e == "bad row"), "{result:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_panic_on_one_worker_ends_all_of_them_as_a_bug() {
    cluster::install_panic_hook();
    let (result, took) = fail_one(|| panic!("index out of bounds"));
    match result {
        Err(Failure::Panic(m)) => assert!(m.contains("index out of bounds") && m.contains("fail_fast.rs"), "{m}"),
        other => panic!("expected a panic failure, got {other:?}"),
    }
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(Failure::<String>::Panic("x".into()).to_string().contains("a bug"));
}

#[test]
fn every_worker_returns_when_none_fails() {
    let sums = execute(&threads(3), |worker| Ok::<_, String>(cluster::sum(worker, worker.index() as u64))).unwrap();
    assert_eq!(sums, vec![3, 3, 3]);
}

#[test]
fn a_peer_that_never_starts_is_given_up_on() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cluster = ClusterConfig {
        workers: 1,
        processes: 2,
        process: 1,
        hosts: vec![format!("127.0.0.1:{}", port + 1), format!("127.0.0.1:{port}")],
        connect_timeout_s: 1,
        ..ClusterConfig::default()
    };
    let started = Instant::now();
    let result = execute(&cluster, |_| Ok::<_, String>(()));
    match result {
        Err(Failure::Connect(m)) => {
            assert!(m.contains("could not reach process 0") && m.contains("connect_timeout_s"), "{m}")
        }
        other => panic!("expected a connect failure, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}
