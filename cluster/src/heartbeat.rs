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
//!
//! Why a close is judged by what preceded it: [`Heartbeats`] is dropped only once the job's
//! communication threads have ended, which timely allows only after every peer's workers ended
//! (`crate::execute`), and its drop sends [`GOODBYE`] before it shuts the connection down,
//! unless it is dropped while unwinding from a communication thread's failure. A close after
//! a goodbye is that ending and says nothing; a close without one is a process that exited (a
//! failure it may have left this one waiting on) or was killed, and marks the peer lost. A
//! failing process whose timely threads shut down cleanly leaves its peers no other sign that
//! it is gone.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::connect::Sockets;

/// How often a process tells its peers it is alive.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The byte a process sends each [`INTERVAL`].
const ALIVE: u8 = 1;

/// The byte a process sends as it drops [`Heartbeats`]: its job ended here without leaving a
/// peer waiting, so the close that follows is not a loss.
const GOODBYE: u8 = 2;

/// The heartbeat threads of one job; dropping it stops them.
pub struct Heartbeats {
    stopped: Arc<AtomicBool>,
    sockets: Vec<TcpStream>,
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        // Dropped while unwinding, the job's connections did not end cleanly (timely's guard
        // panics on a receive thread that failed): a peer may still wait on this process.
        let clean = !std::thread::panicking();
        for mut socket in &self.sockets {
            if clean {
                let _ = socket.write_all(&[GOODBYE]);
            }
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

/// Sends [`ALIVE`] each [`INTERVAL`] until stopped or the connection fails.
fn send(mut socket: TcpStream, stopped: &AtomicBool) {
    while !stopped.load(Ordering::Relaxed) && socket.write_all(&[ALIVE]).is_ok() {
        std::thread::sleep(INTERVAL);
    }
}

/// Reads the peer's bytes: silence for `timeout`, or a close without [`GOODBYE`], marks the
/// peer lost (unless this process is ending its own job).
fn listen(mut socket: TcpStream, stopped: &AtomicBool, who: &str, timeout: Duration) {
    let mut buffer = [0u8; 64];
    let mut farewell = false;
    let lost = loop {
        match socket.read(&mut buffer) {
            Ok(0) => break format!("{who} ended; its log says why"),
            Ok(n) => farewell |= buffer[..n].contains(&GOODBYE),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break format!(
                    "{who} sent nothing for {}s: it is stopped, hung or cut off from this one \
                     (the limit is [cluster] peer_timeout_s)",
                    timeout.as_secs()
                );
            }
            Err(e) => break format!("{who} ended; its log says why (heartbeat: {e})"),
        }
    };
    if !farewell && !stopped.load(Ordering::Relaxed) {
        crate::wait::peer_lost(lost);
    }
}
