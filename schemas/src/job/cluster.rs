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
    /// In a job file either a list or one template holding `{i}`, the process index
    /// (`"graphflat-{i}.graphflat:2101"`: the pods of a Kubernetes indexed Job behind a
    /// headless Service), expanded here for every process.
    #[serde(deserialize_with = "hosts")]
    pub hosts: Vec<String>,
    /// Seconds a process waits for the others to connect before it gives up.
    pub connect_timeout_s: u64,
    /// Seconds a process waits to hear from a connected peer before it judges the peer gone (a
    /// stopped process, a network cut without a reset) and ends the job. Every process sends a
    /// heartbeat each second on its own connection, so busy peers are never judged gone.
    pub peer_timeout_s: u64,
    /// A fingerprint of the job as this process read it (every key but `process`), set by the
    /// binary, not a key of the file: processes whose jobs differ refuse to connect (each runs
    /// its stages on its own reading of the job, so a difference would go unseen).
    #[serde(skip)]
    pub job: u64,
}

/// The placeholder of a `hosts` template: the process index.
pub const HOST_INDEX: &str = "{i}";

/// A template's entries are kept as the template itself, marked by [`HOST_INDEX`]; a list as
/// it is. [`ClusterConfig::addresses`] expands the template once `processes` is final (the
/// command line may set it).
fn hosts<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct Hosts;
    impl<'de> serde::de::Visitor<'de> for Hosts {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(
                "a list of \"host:port\", one a process, or one template holding {i} (\"graphflat-{i}.svc:2101\")",
            )
        }
        fn visit_str<E: serde::de::Error>(self, template: &str) -> Result<Self::Value, E> {
            if !template.contains(HOST_INDEX) {
                return Err(E::custom(format!(
                    "hosts = {template:?} is one string: a template holds {HOST_INDEX} (the process index), or list every process's \"host:port\""
                )));
            }
            Ok(vec![template.to_owned()])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(host) = seq.next_element::<String>()? {
                out.push(host);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_any(Hosts)
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
            job: 0,
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
        if !self.is_template() && !self.hosts.is_empty() && self.hosts.len() != self.processes {
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

    /// Whether `hosts` is one template (see [`ClusterConfig::hosts`]).
    fn is_template(&self) -> bool {
        matches!(&self.hosts[..], [one] if one.contains(HOST_INDEX))
    }

    /// Every process's address, defaults filled in and a template expanded.
    pub fn addresses(&self) -> Vec<String> {
        match &self.hosts[..] {
            [] => (0..self.processes).map(|i| format!("127.0.0.1:{}", DEFAULT_FIRST_PORT + i)).collect(),
            [template] if self.is_template() => {
                (0..self.processes).map(|i| template.replace(HOST_INDEX, &i.to_string())).collect()
            }
            listed => listed.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(text: &str) -> Result<ClusterConfig, String> {
        let config: ClusterConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        config.check().map_err(|e| e.to_string())?;
        Ok(config)
    }

    /// A template names every process's host by its index, for any process count; a list
    /// names each; a string without `{i}` is neither.
    #[test]
    fn hosts_are_a_list_or_a_template_of_the_process_index() {
        let template = cluster("processes = 3\nhosts = \"graphflat-{i}.graphflat:2101\"").unwrap();
        let want = ["graphflat-0.graphflat:2101", "graphflat-1.graphflat:2101", "graphflat-2.graphflat:2101"];
        assert_eq!(template.addresses(), want);
        let listed = cluster("processes = 2\nhosts = [\"a:1\", \"b:2\"]").unwrap();
        assert_eq!(listed.addresses(), ["a:1", "b:2"]);
        assert_eq!(cluster("processes = 2").unwrap().addresses(), ["127.0.0.1:2101", "127.0.0.1:2102"]);
        let plain = cluster("processes = 2\nhosts = \"graphflat:2101\"").unwrap_err();
        assert!(plain.contains("a template holds {i}"), "{plain}");
        let short = cluster("processes = 3\nhosts = [\"a:1\", \"b:2\"]").unwrap_err();
        assert!(short.contains("hosts lists 2 entries for 3 processes"), "{short}");
        assert!(cluster("hosts = 7").unwrap_err().contains("one template holding {i}"));
    }
}
