//! Job files built from typed values and rendered as TOML, so paths and strings are quoted the
//! one way TOML reads them back: `Job::flatten(&data, &out).key("fanouts", vec![5, 5])`. Tests
//! of malformed job files (unknown keys, secrets, bytes that are not UTF-8) write their text as
//! it is, with `write_job`.

use std::fmt;
use std::path::{Path, PathBuf};

use toml::Value;

/// A job file: its tables in order, each with its keys in the order they were first set.
#[derive(Clone, Debug)]
pub struct Job {
    tables: Vec<Table>,
}

#[derive(Clone, Debug)]
struct Table {
    name: &'static str,
    keys: Vec<(String, Value)>,
}

/// A path or URI as a job file's string.
pub fn location(path: impl AsRef<Path>) -> String {
    path.as_ref().display().to_string()
}

impl Job {
    /// One table, `[name]`, with no keys yet.
    fn table(name: &'static str) -> Job {
        Job { tables: vec![Table { name, keys: Vec::new() }] }
    }

    /// `[name]` with no keys yet (a stage table the helpers below do not build).
    pub fn table_named(name: &'static str) -> Job {
        Job::table(name)
    }

    /// `[flatten]` of the node table `data/nodes` and the edge table `data/edges` (paths or
    /// URIs) into `output`.
    pub fn flatten(data: impl AsRef<Path>, output: impl AsRef<Path>) -> Job {
        let data = data.as_ref();
        Job::table("flatten")
            .key("nodes", location(data.join("nodes")))
            .key("edges", location(data.join("edges")))
            .key("output", location(output))
    }

    /// `[train]` on the records in `records` into the model directory `output`.
    pub fn train(records: impl AsRef<Path>, output: impl AsRef<Path>) -> Job {
        Job::table("train").key("records", location(records)).key("output", location(output))
    }

    /// `[infer]` over `data/nodes` and `data/edges` with the model in `model`, into `output`.
    pub fn infer(data: impl AsRef<Path>, model: impl AsRef<Path>, output: impl AsRef<Path>) -> Job {
        let data = data.as_ref();
        Job::table("infer")
            .key("nodes", location(data.join("nodes")))
            .key("edges", location(data.join("edges")))
            .key("model", location(model))
            .key("output", location(output))
    }

    /// `[cluster]`, with the keys set after it.
    pub fn cluster() -> Job {
        Job::table("cluster")
    }

    /// `[cluster]` of `processes` processes of one worker each, on free loopback ports.
    pub fn loopback(processes: usize) -> Job {
        Job::cluster().key("workers", 1).key("processes", processes as i64).key("hosts", loopback_hosts(processes))
    }

    /// `[report]`: the job's page written to `page`.
    pub fn report(page: impl AsRef<Path>) -> Job {
        Job::table("report").key("output", location(page))
    }

    /// `[storage]`, with the keys set after it.
    pub fn storage() -> Job {
        Job::table("storage")
    }

    /// Sets `key` of the last table to `value`, in the place of any value set before.
    pub fn key(mut self, key: &str, value: impl Into<Value>) -> Job {
        let keys = &mut self.tables.last_mut().expect("a job has a table").keys;
        let value = value.into();
        match keys.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => keys.push((key.to_owned(), value)),
        }
        self
    }

    /// This job's tables, then `next`'s.
    pub fn and(mut self, next: Job) -> Job {
        self.tables.extend(next.tables);
        self
    }

    /// The keys of the table `[name]`, as TOML (to deserialize a stage's settings from).
    pub fn keys_of(&self, name: &str) -> toml::Table {
        let table = self.tables.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no [{name}] in\n{self}"));
        table.keys.iter().cloned().collect()
    }

    /// Writes the job file `dir/<name>.toml`; returns its path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        write_job(dir, name, &self.to_string())
    }
}

impl fmt::Display for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for table in &self.tables {
            writeln!(f, "[{}]", table.name)?;
            for (key, value) in &table.keys {
                writeln!(f, "{key} = {value}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// `n` addresses `127.0.0.1:<port>` of free loopback ports.
pub fn loopback_hosts(n: usize) -> Vec<String> {
    (0..n).map(|_| format!("127.0.0.1:{}", super::free_port())).collect()
}

/// Writes `text` as the job file `dir/<name>.toml`; returns its path.
pub fn write_job(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}
