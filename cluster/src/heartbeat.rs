//! Liveness of the peer processes. A process that stops without dying (SIGSTOP, a machine that
//! hangs, a network cut without a reset) keeps its connections open, so timely's threads wait
//! on it forever. Every process therefore sends one byte each [`INTERVAL`] to every peer on a
//! connection of its own ([`crate::connect::Channel::Heartbeat`]), from a thread that does
//! nothing else, and reads the peer's bytes with a timeout: a peer silent for
//! `[cluster] peer_timeout_s` plus one [`INTERVAL`] is judged gone and the job ends as for a
//! lost peer. The extra interval is the most that can pass between the peer's last byte and
//! the moment it stopped, so a stall shorter than `peer_timeout_s` never ends the job, and a
//! stop is noticed within `peer_timeout_s` + [`INTERVAL`].
//!
//! Why a busy peer is never judged gone: its heartbeat thread does no work of the job, so it
//! sends on time however long the peer's workers compute or wait, as long as the process runs.
//! Why an ended peer is not reported here: a closed connection is a peer that exited, which
//! timely's own connection reports with the peer's cause; the reader just stops. When the job
//! ends in this process, [`Heartbeats`] is dropped: it shuts its connections down, so peers see
//! a close, never silence.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::connect::Sockets;

/// How often a process tells its peers it is alive.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The heartbeat threads of one job; dropping it stops them.
pub struct Heartbeats {
    stopped: Arc<AtomicBool>,
    sockets: Vec<TcpStream>,
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        for socket in &self.sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Starts a sender and a reader thread per peer. `addresses` name the peers in messages.
pub fn start(sockets: Sockets, addresses: &[String], timeout: Duration) -> std::io::Result<Heartbeats> {
    let stopped = Arc::new(AtomicBool::new(false));
    let mut kept = Vec::new();
    for (peer, socket) in sockets.into_iter().enumerate() {
        let Some(socket) = socket else { continue };
        socket.set_read_timeout(Some(timeout + INTERVAL))?;
        socket.set_write_timeout(Some(timeout))?;
        let (sender, reader) = (socket.try_clone()?, socket.try_clone()?);
        kept.push(socket);
        let who = format!("process {peer} ({})", addresses[peer]);
        let stop = stopped.clone();
        spawn(format!("heartbeat:send{peer}"), move || send(sender, &stop))?;
        let stop = stopped.clone();
        spawn(format!("heartbeat:recv{peer}"), move || listen(reader, &stop, &who, timeout))?;
    }
    Ok(Heartbeats { stopped, sockets: kept })
}

fn spawn(name: String, body: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new().name(name).spawn(body).map(drop)
}

/// Sends a byte each [`INTERVAL`] until stopped or the connection fails.
fn send(mut socket: TcpStream, stopped: &AtomicBool) {
    while !stopped.load(Ordering::Relaxed) && socket.write_all(&[1]).is_ok() {
        std::thread::sleep(INTERVAL);
    }
}

/// Reads the peer's bytes; silence for `timeout` marks the peer lost.
fn listen(mut socket: TcpStream, stopped: &AtomicBool, who: &str, timeout: Duration) {
    let mut buffer = [0u8; 64];
    loop {
        match socket.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !stopped.load(Ordering::Relaxed) {
                    crate::wait::peer_lost(format!(
                        "{who} sent nothing for {}s: it is stopped, hung or cut off from this one \
                         (the limit is [cluster] peer_timeout_s)",
                        timeout.as_secs()
                    ));
                }
                return;
            }
            Err(_) => return,
        }
    }
}
