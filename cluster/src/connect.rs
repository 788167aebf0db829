//! The TCP connections between the processes of a cluster, made here rather than by timely so
//! that a peer that never starts is given up on after a deadline (timely retries forever and
//! prints a line a second on stdout). The handshake is timely's: process `i` connects to every
//! process below it and sends its index as a big-endian u64; it accepts the processes above it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One socket per process, `None` at this process's own index.
pub type Sockets = Vec<Option<TcpStream>>;

/// Connects this process (`me`) to every other in `addresses` within `timeout`.
pub fn connect(addresses: &[String], me: usize, timeout: Duration) -> Result<Sockets, String> {
    let deadline = Instant::now() + timeout;
    let listener = TcpListener::bind(&addresses[me])
        .map_err(|e| format!("process {me} cannot listen on {}: {e}", addresses[me]))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut sockets: Sockets = (0..addresses.len()).map(|_| None).collect();
    let mut announced = false;
    loop {
        for (peer, address) in addresses.iter().enumerate().take(me) {
            if sockets[peer].is_none() {
                sockets[peer] = try_connect(address, me);
            }
        }
        while let Ok((mut stream, _)) = listener.accept() {
            stream.set_nonblocking(false).map_err(|e| e.to_string())?;
            let mut index = [0u8; 8];
            // A stray connection that does not send an index is dropped.
            stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
            if stream.read_exact(&mut index).is_ok() {
                let peer = u64::from_be_bytes(index) as usize;
                if peer > me && peer < addresses.len() {
                    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
                    stream.set_nodelay(true).map_err(|e| e.to_string())?;
                    sockets[peer] = Some(stream);
                }
            }
        }
        let missing: Vec<usize> = (0..addresses.len()).filter(|&p| p != me && sockets[p].is_none()).collect();
        if missing.is_empty() {
            return Ok(sockets);
        }
        if Instant::now() >= deadline {
            let named: Vec<String> = missing.iter().map(|&p| format!("{p} ({})", addresses[p])).collect();
            return Err(format!(
                "process {me} could not reach process {} within {}s: is every process started with the \
                 same [cluster] hosts? (the limit is [cluster] connect_timeout_s)",
                named.join(", "),
                timeout.as_secs()
            ));
        }
        if !announced && deadline - Instant::now() < timeout / 2 {
            tracing::info!("cluster: process {me} is waiting for process(es) {missing:?}");
            announced = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One attempt to connect to a lower process and send our index.
fn try_connect(address: &str, me: usize) -> Option<TcpStream> {
    let addr = address.to_socket_addrs().ok()?.next()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_nodelay(true).ok()?;
    stream.write_all(&(me as u64).to_be_bytes()).ok()?;
    Some(stream)
}
