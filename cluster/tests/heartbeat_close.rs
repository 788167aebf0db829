//! How a peer's closed heartbeat connection is read: a close after the goodbye that dropping
//! `Heartbeats` sends is a job that ended and says nothing; a close without one is a process
//! that exited and marks the peer lost. One test, in a binary of its own: a lost peer is
//! process-wide state (`cluster::wait::aborting`).

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use cluster::heartbeat;

/// A connected pair of loopback sockets.
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let near = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (far, _) = listener.accept().unwrap();
    (near, far)
}

/// Heartbeats of "process 0" whose only peer, process 1, is at the far end of `socket`.
fn watch(socket: TcpStream) -> heartbeat::Heartbeats {
    let addresses = ["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()];
    heartbeat::start(vec![None, Some(socket)], &addresses, Duration::from_secs(30)).unwrap()
}

/// Whether the peer is judged lost within `wait`.
fn lost_within(wait: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < wait {
        if cluster::wait::aborting() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn a_close_after_a_goodbye_is_an_ending_and_one_without_is_a_lost_peer() {
    // The peer's job ends as every job that finishes does: its `Heartbeats` is dropped.
    let (near, far) = pair();
    let _this = watch(near);
    let peer = heartbeat::start(
        vec![Some(far), None],
        &["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()],
        Duration::from_secs(30),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(peer);
    assert!(!lost_within(Duration::from_millis(500)), "a peer that said goodbye was judged lost");

    // The peer's process exits: its socket closes with no goodbye.
    let (near, far) = pair();
    let _this = watch(near);
    drop(far);
    assert!(lost_within(Duration::from_secs(5)), "a peer whose connection closed was not judged lost");
}
