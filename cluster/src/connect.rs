//! The TCP connections between the processes of a cluster, made here rather than by timely so
//! that a peer that never starts is given up on after a deadline (timely retries forever and
//! prints a line a second on stdout). Each pair of processes has two connections: one for
//! timely's data and one for [`crate::heartbeat`]. The handshake is timely's plus a job check:
//! process `i` connects to every process below it and sends its index as a big-endian u64,
//! the connection's [`Channel`] and its job's fingerprint (`ClusterConfig::job`, a u64); the
//! lower process answers one byte, 1 when the fingerprint is its own, 0 when it is not, and
//! then both end with an error naming the two processes: a cluster whose processes read
//! different job files never starts.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Why the processes did not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// A peer was not reached, or a socket failed: it may pass.
    Unreached(String),
    /// Two processes read different jobs: it will not pass until the job files agree.
    DifferentJobs(String),
}

impl From<String> for ConnectError {
    fn from(message: String) -> Self {
        ConnectError::Unreached(message)
    }
}

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
pub fn connect(addresses: &[String], me: usize, job: u64, timeout: Duration) -> Result<Connections, ConnectError> {
    let deadline = Instant::now() + timeout;
    let listen = listen_address(&addresses[me]).map_err(|e| format!("process {me}: [cluster] hosts: {e}"))?;
    let listener = TcpListener::bind(listen)
        .map_err(|e| format!("process {me} cannot listen on {listen} ({}): {e}", addresses[me]))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let none = || (0..addresses.len()).map(|_| None).collect();
    let mut connections = Connections { data: none(), heartbeat: none() };
    let mut announced = false;
    loop {
        for (peer, address) in addresses.iter().enumerate().take(me) {
            for channel in CHANNELS {
                let slot = &mut connections.slot(channel)[peer];
                if slot.is_none() {
                    *slot = try_connect((peer, address), (me, job), channel)?;
                }
            }
        }
        while let Ok((stream, _)) = listener.accept() {
            if let Some((peer, channel, stream)) = accept(stream, (me, job), addresses.len())? {
                connections.slot(channel)[peer] = Some(stream);
            }
        }
        let missing = connections.missing(me);
        if missing.is_empty() {
            return Ok(connections);
        }
        if Instant::now() >= deadline {
            let named: Vec<String> = missing.iter().map(|&p| format!("{p} ({})", addresses[p])).collect();
            return Err(ConnectError::Unreached(format!(
                "process {me} could not reach process {} within {}s: is every process started with the \
                 same [cluster] hosts? (the limit is [cluster] connect_timeout_s)",
                named.join(", "),
                timeout.as_secs()
            )));
        }
        if !announced && deadline - Instant::now() < timeout / 2 {
            tracing::info!("cluster: process {me} is waiting for process(es) {missing:?}");
            announced = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where a process whose address is `own` (`host:port`) listens: there when it is a loopback
/// address (a cluster on one machine stays off the network), else on every interface at its
/// port. A pod's own name may not resolve when it starts (a headless Service publishes it once
/// the pod runs) and a machine may know itself by another address than its peers do: peers
/// dial the name, retrying until `connect_timeout_s`.
fn listen_address(own: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = own.parse::<SocketAddr>() {
        return Ok(if address.ip().is_loopback() { address } else { unspecified(address.ip(), address.port()) });
    }
    let Some((host, port)) = own.rsplit_once(':') else {
        return Err(format!("{own:?} has no port (host:port)"));
    };
    let port: u16 = port.parse().map_err(|_| format!("{own:?}: {port:?} is no port"))?;
    if host == "localhost" {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    Ok(unspecified(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
}

/// Every interface of `ip`'s family, at `port`.
fn unspecified(ip: IpAddr, port: u16) -> SocketAddr {
    match ip {
        IpAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        IpAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
    }
}

/// Reads an accepted connection's handshake; a stray connection that does not send one within
/// a few seconds, or names no process above this one, is dropped (`None`).
fn accept(
    mut stream: TcpStream,
    (me, job): (usize, u64),
    processes: usize,
) -> Result<Option<(usize, Channel, TcpStream)>, ConnectError> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut hello = [0u8; HELLO];
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
    let same = u64::from_be_bytes(hello[9..].try_into().expect("eight bytes")) == job;
    if stream.write_all(&[u8::from(same)]).is_err() {
        return Ok(None);
    }
    if !same {
        return Err(ConnectError::DifferentJobs(different_jobs(me, peer)));
    }
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(Some((peer, channel, stream)))
}

/// The handshake's bytes: the index, the channel, the job's fingerprint.
const HELLO: usize = 8 + 1 + 8;

/// The error both processes end with when their jobs differ.
fn different_jobs(a: usize, b: usize) -> String {
    format!(
        "processes {} and {} read different jobs: every process runs the same job file with the same options \
         (only --process differs)",
        a.min(b),
        a.max(b)
    )
}

/// One attempt to connect to a lower process, send our index, the channel and the job's
/// fingerprint, and read the answer (`None`: not reached, try again; an error: the jobs
/// differ).
fn try_connect(
    (peer, address): (usize, &str),
    (me, job): (usize, u64),
    channel: Channel,
) -> Result<Option<TcpStream>, ConnectError> {
    let Some(mut stream) = reach(address) else { return Ok(None) };
    let mut hello = [0u8; HELLO];
    hello[..8].copy_from_slice(&(me as u64).to_be_bytes());
    hello[8] = channel as u8;
    hello[9..].copy_from_slice(&job.to_be_bytes());
    let mut answer = [0u8; 1];
    let answered = stream.write_all(&hello).and_then(|()| stream.read_exact(&mut answer));
    match (answered, answer[0]) {
        (Ok(()), 1) => Ok(stream.set_read_timeout(None).ok().map(|()| stream)),
        (Ok(()), _) => {
            Err(ConnectError::DifferentJobs(format!("{} (process {peer} is {address})", different_jobs(me, peer))))
        }
        (Err(_), _) => Ok(None),
    }
}

/// A connection to `address` with the handshake's answer awaited at most a few seconds; none
/// when the connection is to itself ([`is_self`]).
fn reach(address: &str) -> Option<TcpStream> {
    let addr = address.to_socket_addrs().ok()?.next()?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    if is_self(&stream) {
        return None;
    }
    stream.set_nodelay(true).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(stream)
}

/// Whether `stream` is connected to itself. Retrying a connect to a peer that is not listening
/// yet, at a port in the kernel's range of ephemeral ports, now and then gets the connect
/// paired with itself (TCP's simultaneous open; once in a few thousand tries on Linux): its
/// handshake would read back this process's own hello and take it for another job's answer,
/// exit 64, where the peer was only late.
fn is_self(stream: &TcpStream) -> bool {
    matches!((stream.local_addr(), stream.peer_addr()), (Ok(own), Ok(peer)) if own == peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket bound to a free port and connected to that same port is connected to itself
    /// (what a retried connect sometimes gets by chance); a connection to a listener is not.
    #[test]
    fn a_connection_to_itself_is_told_from_a_peer() {
        use socket2::{Domain, Socket, Type};
        let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        socket.bind(&free.into()).unwrap();
        socket.connect(&free.into()).unwrap();
        let looped: TcpStream = socket.into();
        assert!(is_self(&looped));
        // Its handshake reads back its own hello, whose first byte is not the answer 1.
        let mut hello = [0u8; HELLO];
        hello[8] = 1;
        let mut answer = [0u8; 1];
        (&looped).write_all(&hello).unwrap();
        (&looped).read_exact(&mut answer).unwrap();
        assert_ne!(answer[0], 1, "without the check, a late peer would read as another job");

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!is_self(&peer));
        assert!(reach(&listener.local_addr().unwrap().to_string()).is_some());
    }

    /// A loopback address is listened on as it is; a name or another address on every
    /// interface at its port; an address without a port is named.
    #[test]
    fn a_process_listens_on_loopback_as_given_and_elsewhere_on_every_interface() {
        let at = |own: &str| listen_address(own).map(|a| a.to_string());
        assert_eq!(at("127.0.0.1:2101"), Ok("127.0.0.1:2101".into()));
        assert_eq!(at("[::1]:2101"), Ok("[::1]:2101".into()));
        assert_eq!(at("localhost:2103"), Ok("127.0.0.1:2103".into()));
        assert_eq!(at("graphflat-0.graphflat:2101"), Ok("0.0.0.0:2101".into()));
        assert_eq!(at("10.0.0.7:2102"), Ok("0.0.0.0:2102".into()));
        assert_eq!(at("[fd00::7]:2102"), Ok("[::]:2102".into()));
        assert!(at("graphflat-0").unwrap_err().contains("no port"));
        assert!(at("graphflat-0:http").unwrap_err().contains("\"http\" is no port"));
    }
}
