//! The TCP connections between the processes of a cluster, made here rather than by timely so
//! that a peer that never starts is given up on after a deadline (timely retries forever and
//! prints a line a second on stdout). Each pair of processes has two connections: one for
//! timely's data and one for [`crate::heartbeat`]. The handshake is timely's plus one byte:
//! process `i` connects to every process below it and sends its index as a big-endian u64,
//! then the connection's [`Channel`]; it accepts the processes above it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One socket per process, `None` at this process's own index.
pub type Sockets = Vec<Option<TcpStream>>;

/// What a connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Channel {
    /// timely's messages.
    Data = 0,
    /// One byte a second each way: the peer is alive.
    Heartbeat = 1,
}

const CHANNELS: [Channel; 2] = [Channel::Data, Channel::Heartbeat];

/// The connections of this process to every other.
pub struct Connections {
    pub data: Sockets,
    pub heartbeat: Sockets,
}

impl Connections {
    fn slot(&mut self, channel: Channel) -> &mut Sockets {
        match channel {
            Channel::Data => &mut self.data,
            Channel::Heartbeat => &mut self.heartbeat,
        }
    }

    fn missing(&self, me: usize) -> Vec<usize> {
        let n = self.data.len();
        (0..n).filter(|&p| p != me && (self.data[p].is_none() || self.heartbeat[p].is_none())).collect()
    }
}

/// Connects this process (`me`) to every other in `addresses` within `timeout`.
pub fn connect(addresses: &[String], me: usize, timeout: Duration) -> Result<Connections, String> {
    let deadline = Instant::now() + timeout;
    let listener = TcpListener::bind(&addresses[me])
        .map_err(|e| format!("process {me} cannot listen on {}: {e}", addresses[me]))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let none = || (0..addresses.len()).map(|_| None).collect();
    let mut connections = Connections { data: none(), heartbeat: none() };
    let mut announced = false;
    loop {
        for (peer, address) in addresses.iter().enumerate().take(me) {
            for channel in CHANNELS {
                let slot = &mut connections.slot(channel)[peer];
                if slot.is_none() {
                    *slot = try_connect(address, me, channel);
                }
            }
        }
        while let Ok((stream, _)) = listener.accept() {
            if let Some((peer, channel, stream)) = accept(stream, me, addresses.len())? {
                connections.slot(channel)[peer] = Some(stream);
            }
        }
        let missing = connections.missing(me);
        if missing.is_empty() {
            return Ok(connections);
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

/// Reads an accepted connection's handshake; a stray connection that does not send one within
/// a few seconds, or names no process above this one, is dropped (`None`).
fn accept(mut stream: TcpStream, me: usize, processes: usize) -> Result<Option<(usize, Channel, TcpStream)>, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut hello = [0u8; 9];
    if stream.read_exact(&mut hello).is_err() {
        return Ok(None);
    }
    let peer = u64::from_be_bytes(hello[..8].try_into().expect("eight bytes")) as usize;
    let channel = match hello[8] {
        0 => Channel::Data,
        1 => Channel::Heartbeat,
        _ => return Ok(None),
    };
    if peer <= me || peer >= processes {
        return Ok(None);
    }
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(Some((peer, channel, stream)))
}

/// One attempt to connect to a lower process and send our index and the channel.
fn try_connect(address: &str, me: usize, channel: Channel) -> Option<TcpStream> {
    let addr = address.to_socket_addrs().ok()?.next()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_nodelay(true).ok()?;
    let mut hello = [0u8; 9];
    hello[..8].copy_from_slice(&(me as u64).to_be_bytes());
    hello[8] = channel as u8;
    stream.write_all(&hello).ok()?;
    Some(stream)
}
