//! A peer whose `Heartbeats` is dropped while its thread unwinds (timely's guard panics on a
//! receive thread that failed, so its connections did not end cleanly) sends no goodbye: its
//! close marks it lost. One test, in a binary of its own: a lost peer is process-wide state
//! (`cluster::wait::aborting`).

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use cluster::heartbeat;

#[test]
fn heartbeats_dropped_while_unwinding_say_no_goodbye() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let near = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (far, _) = listener.accept().unwrap();
    let addresses = ["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()];
    let _this = heartbeat::start(vec![None, Some(near)], &addresses, Duration::from_secs(30)).unwrap();
    let peer = heartbeat::start(vec![Some(far), None], &addresses, Duration::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let unwound = std::thread::spawn(move || {
        let _held = peer;
        panic!("a receive thread failed");
    })
    .join();
    assert!(unwound.is_err());
    let started = Instant::now();
    while !cluster::wait::aborting() {
        assert!(started.elapsed() < Duration::from_secs(5), "a peer that unwound was not judged lost");
        std::thread::sleep(Duration::from_millis(10));
    }
}
