//! The `[cluster]` table: where the job runs, in timely's cluster mode. The same file runs on one
//! thread or many machines.

use super::JobError;

use serde::{Deserialize, Serialize};

/// Processes taking part when a job sets none: one, on this machine.
pub const DEFAULT_PROCESSES: usize = 1;
/// Seconds a process waits for the others to connect, when a job sets none.
pub const DEFAULT_CONNECT_TIMEOUT_S: u64 = 60;
/// Seconds of silence from a connected peer before it is judged gone, when a job sets none.
pub const DEFAULT_PEER_TIMEOUT_S: u64 = 60;
/// The port of process 0 when a job lists no `hosts`; process i listens on this plus i, on
/// 127.0.0.1.
pub const DEFAULT_FIRST_PORT: usize = 2101;

/// The longest `connect_timeout_s` or `peer_timeout_s` a job may set: longer is a mistake
/// (and would overflow a deadline).
pub const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// The `[cluster]` table. Every key is optional: a missing one takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Worker threads per process; 0 means one per available core.
    pub workers: usize,
    /// How many processes take part.
    pub processes: usize,
    /// This process's index, 0-based (usually given on the command line with `--process`).
    pub process: usize,
    /// `host:port` of every process, in process order. Empty: `127.0.0.1:2101`, `:2102`, ...
    pub hosts: Vec<String>,
    /// Seconds a process waits for the others to connect before it gives up.
    pub connect_timeout_s: u64,
    /// Seconds a process waits to hear from a connected peer before it judges the peer gone (a
    /// stopped process, a network cut without a reset) and ends the job. Every process sends a
    /// heartbeat each second on its own connection, so busy peers are never judged gone.
    pub peer_timeout_s: u64,
}

impl Default for ClusterConfig {
    /// One process of one worker per core, meeting on 127.0.0.1.
    fn default() -> Self {
        ClusterConfig {
            workers: 0,
            processes: DEFAULT_PROCESSES,
            process: 0,
            hosts: Vec::new(),
            connect_timeout_s: DEFAULT_CONNECT_TIMEOUT_S,
            peer_timeout_s: DEFAULT_PEER_TIMEOUT_S,
        }
    }
}

impl ClusterConfig {
    pub fn check(&self) -> Result<(), JobError> {
        if self.processes == 0 {
            return Err(JobError::invalid("cluster", "processes must be at least 1"));
        }
        if self.process >= self.processes {
            return Err(JobError::invalid(
                "cluster",
                format!("process {} is out of range for {} processes", self.process, self.processes),
            ));
        }
        if self.connect_timeout_s > MAX_TIMEOUT_S || self.peer_timeout_s > MAX_TIMEOUT_S {
            return Err(JobError::invalid(
                "cluster",
                format!("connect_timeout_s and peer_timeout_s must be at most {MAX_TIMEOUT_S} (a week)"),
            ));
        }
        if self.peer_timeout_s < 2 {
            return Err(JobError::invalid(
                "cluster",
                "peer_timeout_s must be at least 2 (heartbeats go out every second)",
            ));
        }
        if !self.hosts.is_empty() && self.hosts.len() != self.processes {
            return Err(JobError::invalid(
                "cluster",
                format!("hosts lists {} entries for {} processes", self.hosts.len(), self.processes),
            ));
        }
        Ok(())
    }

    /// Worker threads per process, with 0 resolved to the available cores.
    pub fn threads(&self) -> usize {
        if self.workers > 0 { self.workers } else { std::thread::available_parallelism().map_or(1, |n| n.get()) }
    }

    /// Every process's address, defaults filled in.
    pub fn addresses(&self) -> Vec<String> {
        if self.hosts.is_empty() {
            (0..self.processes).map(|i| format!("127.0.0.1:{}", DEFAULT_FIRST_PORT + i)).collect()
        } else {
            self.hosts.clone()
        }
    }
}
