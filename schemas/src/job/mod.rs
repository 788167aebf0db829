//! Job files: `graphflat run job.toml` reads one of these. Every knob has a default; a table that
//! is absent is a stage that does not run. Unknown keys are errors (a typo must not be ignored).
//!
//! One module per table, each holding its config, its `DEFAULT_*` constants and its checks. The
//! constants are the one statement of each default: serde, the `Default` impls and the command
//! line read them, and `schemas/tests/documented_defaults.rs` holds the job-file
//! reference, `docs/jobs.md`, to them, and to the keys the code has.

use serde::{Deserialize, Serialize};

#[macro_use]
mod serde_defaults;

pub mod changes;
pub mod cluster;
pub mod device;
pub mod flatten;
pub mod generate;
pub mod graph;
pub mod infer;
pub mod partition;
pub mod precompute;
pub mod report;
pub mod storage;
pub mod targets;
pub mod train;

pub use crate::sampler::Sampler;
pub use crate::split::Split;
pub use cluster::ClusterConfig;
pub use device::{Aggregation, DeviceKind};
pub use flatten::{FlattenConfig, MAX_HOPS};
pub use generate::GenerateConfig;
pub use graph::{GraphConfig, TypedGraph};
pub use infer::{InferConfig, MissingEmbedding};
pub use partition::PartitionConfig;
pub use precompute::PrecomputeConfig;
pub use report::ReportConfig;
pub use storage::StorageConfig;
pub use targets::Targets;
pub use train::{DEFAULT_LINK_PATIENCE, LearnedConfig, OptimizerKind, PsMode, SparseOptimizerKind, TrainConfig};

/// The bytes of a `*_mb` setting, saturating: a size past what a machine holds means no limit,
/// not one wrapped around to a few bytes.
pub fn mb_bytes(mb: u64) -> u64 {
    mb.saturating_mul(1 << 20)
}

/// A whole job file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// How object stores (`s3://`) are reached; every stage of the job uses it.
    #[serde(default)]
    pub storage: StorageConfig,
    /// Generates a synthetic graph first, unless its output already holds one.
    pub generate: Option<GenerateConfig>,
    /// A typed graph (node types and relations) that `[flatten]` and `[infer]` read instead of
    /// their `nodes` and `edges`.
    pub graph: Option<GraphConfig>,
    /// Partitions the graph into parts that keep most edges inside one (runs before
    /// `[flatten]`).
    pub partition: Option<PartitionConfig>,
    /// Multiplies the node table's features by the normalized adjacency once (runs before
    /// `[flatten]`).
    pub precompute: Option<PrecomputeConfig>,
    pub flatten: Option<FlattenConfig>,
    pub train: Option<TrainConfig>,
    pub infer: Option<InferConfig>,
    /// Where the job's report page goes besides a model's directory.
    pub report: Option<ReportConfig>,
}

impl JobFile {
    /// Parses and checks a job file's text.
    pub fn parse(text: &str) -> Result<Self, JobError> {
        let mut job: JobFile = toml::from_str(text).map_err(|e| JobError::Syntax(parse_error(text, &e)))?;
        if let Some(graph) = &job.graph {
            graph.resolve()?;
        }
        if let Some(partition) = &mut job.partition {
            partition.set_graph(job.graph.as_ref())?;
            partition.check()?;
        }
        if let Some(precompute) = &job.precompute {
            precompute.check()?;
        }
        if let Some(flatten) = &mut job.flatten {
            flatten.set_graph(job.graph.as_ref())?;
            flatten.check()?;
        }
        if let Some(infer) = &mut job.infer {
            infer.set_graph(job.graph.as_ref())?;
        }
        if let Some(train) = &mut job.train {
            train.set_graph(job.graph.as_ref())?;
            train.check()?;
        }
        if let (Some(train), Some(flatten)) = (&job.train, &job.flatten)
            && same_location(&train.records, &flatten.output)
        {
            train.check_learned_types(job.graph.as_ref())?;
        }
        if let Some(infer) = &job.infer {
            infer.check()?;
        }
        if let Some(report) = &job.report {
            report.check()?;
        }
        // [cluster] is checked by the caller, after the command line's overrides.
        job.storage.check()?;
        Ok(job)
    }
}

/// Whether two locations of a job file name the same place, as written: a trailing `/`, `.`,
/// `..`, doubled slashes, `file://` and a relative path (against the working directory) do not
/// make two places of one. Nothing is read: two links to one directory stay two.
pub fn same_location(a: &str, b: &str) -> bool {
    fn lexical(location: &str) -> (String, Vec<String>) {
        let location = location.strip_prefix("file://").unwrap_or(location);
        let (scheme, path) = match location.split_once("://") {
            Some((scheme, rest)) => (format!("{scheme}://"), rest.to_owned()),
            None if location.starts_with('/') => (String::new(), location.to_owned()),
            None => {
                let here = std::env::current_dir().unwrap_or_default();
                (String::new(), here.join(location).to_string_lossy().into_owned())
            }
        };
        let mut parts: Vec<String> = Vec::new();
        for part in path.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                part => parts.push(part.to_owned()),
            }
        }
        (scheme, parts)
    }
    lexical(a) == lexical(b)
}

/// Why a job file cannot work, as the message a user reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// Not TOML, or a key or value the job format does not have. toml's error is not kept as
    /// a source: its text quotes the line, which may hold a secret (see [`parse_error`]).
    #[error("{0}")]
    Syntax(String),
    /// A value of a table that cannot work.
    #[error("[{section}] {problem}")]
    Invalid { section: &'static str, problem: String },
}

impl JobError {
    pub fn invalid(section: &'static str, problem: impl Into<String>) -> Self {
        JobError::Invalid { section, problem: problem.into() }
    }
}

/// A job file's parse error without quoting the file's text when the line holds a secret (a
/// key such as `secret_access_key`, or a URI with user information): the message and the line
/// only. Other errors keep toml's quote of the line, which shows where the mistake is.
fn parse_error(text: &str, error: &toml::de::Error) -> String {
    let line_of = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
    let secret = error.span().is_some_and(|span| {
        let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
        let end = text[span.end.min(text.len())..].find('\n').map_or(text.len(), |i| span.end.min(text.len()) + i);
        let line = &text[start..end];
        let key = line.split('=').next().unwrap_or("").trim();
        crate::redact::is_secret_key(key) || crate::redact::redact(line) != line
    });
    match (secret, error.span()) {
        (true, Some(span)) => {
            format!("line {}: {} (the line is not shown: it holds a secret)", line_of(span.start), error.message())
        }
        _ => crate::redact::redact(&error.to_string()),
    }
}

/// A stage's `partition` key, when given, names a table.
fn check_partition(stage: &'static str, partition: Option<&str>) -> Result<(), JobError> {
    match partition {
        Some(path) if path.trim().is_empty() => Err(JobError::invalid(
            stage,
            "partition is empty: name a partition table (node_id, part), or leave the key out for the hash owner",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Fanout, Layers};

    #[test]
    fn parse_errors_never_quote_a_secret() {
        for text in [
            "[storage]\nsecret_access_key = \"hunter2\"\n",
            "[storage]\nendpoint = \"http://key:hunter2@host\"\nbogus = 1\n",
            "[storage]\nendpoint = \"http://key:hunter2@host\" x\n",
        ] {
            let error = JobFile::parse(text).unwrap_err().to_string();
            assert!(!error.contains("hunter2"), "{error}");
            assert!(error.contains("line"), "{error}");
        }
    }

    #[test]
    fn an_empty_partition_is_refused_in_flatten_and_infer() {
        let flatten = "[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\npartition = \" \"\n";
        let infer = "[infer]\nnodes = \"n\"\nedges = \"e\"\nmodel = \"m\"\noutput = \"o\"\npartition = \"\"\n";
        for (stage, text) in [("flatten", flatten), ("infer", infer)] {
            let error = JobFile::parse(text).unwrap_err().to_string();
            assert!(error.contains(stage) && error.contains("partition is empty"), "{error}");
        }
        let named = JobFile::parse(&flatten.replace("partition = \" \"", "partition = \"p\"")).unwrap();
        assert_eq!(named.flatten.unwrap().partition.as_deref(), Some("p"));
    }

    #[test]
    fn defaults_fill_a_minimal_job() {
        let job = JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\n").unwrap();
        let f = job.flatten.unwrap();
        assert_eq!((f.hops, f.sampler, f.targets.clone()), (2, Sampler::Uniform, Targets::All));
        assert_eq!(f.layers(), Layers::new(vec![Fanout::Sample(10); 2]));
        assert_eq!(f.recorded_fanouts(), vec![10, 10]);
        assert_eq!(job.cluster.processes, 1);
    }

    /// A table that names only its paths parses to the `Default` impl: serde's defaults and
    /// `Default` read the same constants.
    #[test]
    fn a_minimal_job_is_the_default_job() {
        let text = "[cluster]\n[storage]\n[generate]\noutput = ''\n[flatten]\nnodes = 'n'\nedges = 'e'\noutput = ''\n\
                    [train]\nrecords = 'r'\noutput = ''\n[infer]\nnodes = 'n'\nedges = 'e'\nmodel = ''\noutput = ''\n\
                    [precompute]\nnodes = 'n'\nedges = 'e'\noutput = ''\n";
        let everything = JobFile {
            cluster: ClusterConfig::default(),
            storage: StorageConfig::default(),
            generate: Some(GenerateConfig::default()),
            graph: None,
            partition: None,
            precompute: Some(PrecomputeConfig { nodes: "n".into(), edges: "e".into(), ..PrecomputeConfig::default() }),
            flatten: Some(FlattenConfig { nodes: "n".into(), edges: "e".into(), ..FlattenConfig::default() }),
            train: Some(TrainConfig { records: "r".into(), ..TrainConfig::default() }),
            infer: Some(InferConfig { nodes: "n".into(), edges: "e".into(), ..InferConfig::default() }),
            report: None,
        };
        assert_eq!(JobFile::parse(text).unwrap(), everything);
        assert_eq!(JobFile::parse("").unwrap(), JobFile::default());
    }

    #[test]
    fn paths_stay_required() {
        let err = JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\n").unwrap_err().to_string();
        assert!(err.contains("missing field `output`"), "{err}");
    }

    #[test]
    fn typos_and_bad_values_are_errors() {
        assert!(JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nhopz = 2\n").is_err());
        assert!(JobFile::parse("[cluster]\nworkerz = 2\n").is_err());
        let err = JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nfanouts = [1]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("fanouts lists 1 values for 2 hops"), "{err}");
        assert!(JobFile::parse("[cluster]\nprocesses = 2\nprocess = 2\n").unwrap().cluster.check().is_err());
        for key in ["connect_timeout_s", "peer_timeout_s"] {
            let huge = JobFile::parse(&format!("[cluster]\n{key} = 10000000000\n")).unwrap();
            assert!(huge.cluster.check().unwrap_err().to_string().contains("at most"), "{key}");
        }
    }

    #[test]
    fn link_keys_on_a_node_job_and_more_than_1024_negatives_are_errors() {
        let flatten =
            |keys: &str| JobFile::parse(&format!("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\n{keys}"));
        let err = error_of;
        for key in
            ["negatives = 3", "negative_sampler = \"degree\"", "disjoint_train = true", "supervision_fraction = 0.5"]
        {
            let name = key.split(' ').next().unwrap();
            let e = err(flatten(key));
            assert!(
                e.contains(&format!("{name} is a key of the link task")) && e.contains("task = \"link\""),
                "{key}: {e}"
            );
            assert!(flatten(&format!("task = \"link\"\n{key}")).is_ok(), "{key}");
        }
        assert!(err(flatten("task = \"link\"\nnegatives = 1000000000")).contains("at most 1024"));
        assert!(flatten("task = \"link\"\nnegatives = 1024").is_ok());
    }

    #[test]
    fn sizes_that_cannot_fit_and_batch_negatives_that_cannot_work_are_errors() {
        let (err, train) = (error_of, train_job);
        assert!(err(train("embedding_dim = 100000000")).contains("at most 16384"));
        assert!(err(train("hidden = 100000")).contains("at most 16384"));
        assert!(train("hidden = 16384").is_ok());
        assert!(err(train("classes = 4611686018427387904")).contains("at most 1048576"));
        assert!(train("classes = 1048576").is_ok());
        let grid = err(train("in_batch_negatives = true\nbatch_size = 20000\ndecoder = \"mlp\"\nembedding_dim = 64"));
        assert!(grid.contains("lower batch_size") && grid.contains("97656 MB"), "{grid}");
        assert!(train("in_batch_negatives = true\nbatch_size = 2048\ndecoder = \"mlp\"\nembedding_dim = 64").is_ok());
        assert!(err(train("in_batch_negatives = true\nbatch_size = 20000")).contains("dot decoder"));
        assert!(train("batch_size = 20000").is_ok(), "the default grid is checked where the task is known");
        let pool =
            err(train("batch_negatives = \"negatives\"\nbatch_size = 20000\ndecoder = \"mlp\"\nembedding_dim = 64"));
        assert!(pool.contains("batch_negatives = \"negatives\"") && pool.contains("97656 MB"), "{pool}");
        assert!(train("batch_negatives = \"none\"\nbatch_size = 20000").is_ok());
        let both = err(train("batch_negatives = \"none\"\nin_batch_negatives = true"));
        assert!(both.contains("older name"), "{both}");
        assert!(err(train("batch_negatives = \"all\"")).contains("unknown variant"));
        let orphan = err(train("learned_embedding_lr = 0.5"));
        assert!(orphan.contains("set learned_embedding_dim"), "{orphan}");
        assert!(train("learned_embedding_dim = 8\nlearned_embedding_optimizer = \"adagrad\"").is_ok());
        assert!(train("learned_embedding_dim = 8\ncheckpoint_every = 1\nresume = true").is_ok());
    }

    #[test]
    fn learned_embedding_types_are_checked_against_the_jobs_graph() {
        let (err, train) = (error_of, train_job);
        // Refused with the job, before any stage of it runs.
        let twice = err(train("learned_embedding_dim = 8\nlearned_embedding_types = [\"user\", \"item\", \"user\"]"));
        assert!(twice.contains("\"user\" twice"), "{twice}");
        assert!(err(train("learned_embedding_types = [\"user\"]")).contains("set learned_embedding_dim"));
        // A type the job's [graph] does not have, when its [flatten] writes the records.
        let graph = "[graph.node_types.user]\ntable = 'u'\n[graph.node_types.item]\ntable = 'i'\n\
                     [graph.relations.buys]\nsrc = 'user'\ndst = 'item'\ntable = 'b'\n\
                     [flatten]\noutput = 'r'\ntarget_type = 'user'\n";
        let typed = |records: &str, types: &str| {
            JobFile::parse(&format!(
                "{graph}[train]\nrecords = '{records}'\noutput = 'm'\nlearned_embedding_dim = 8\n\
                 learned_embedding_types = {types}\n"
            ))
        };
        let unknown = err(typed("r", "['user', 'buyer']"));
        assert!(unknown.contains("\"buyer\", no node type of [graph] (item, user)"), "{unknown}");
        assert!(typed("r", "['user']").is_ok());
        assert!(typed("other-records", "['buyer']").is_ok(), "records of another graph are checked when read");
        for records in ["r/", "./r", "x/../r", "r//", "file://r"] {
            assert!(err(typed(records, "['buyer']")).contains("no node type of [graph]"), "{records}");
        }
        // A homogeneous graph's records have no types to name.
        let plain = "[flatten]\nnodes = 'n'\nedges = 'e'\noutput = '/x/r'\n[train]\nrecords = '/x/y/../r/'\n\
                     output = 'm'\nlearned_embedding_dim = 8\nlearned_embedding_types = ['user']\n";
        assert!(err(JobFile::parse(plain)).contains("homogeneous"));
        assert!(same_location("s3://b/x/", "s3://b/x") && !same_location("s3://b/x", "s3://c/x"));
    }

    /// A job's error as its message; empty for a job that parses.
    fn error_of(r: Result<JobFile, JobError>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    /// A `[train]` job over records with `keys`.
    fn train_job(keys: &str) -> Result<JobFile, JobError> {
        JobFile::parse(&format!("[train]\nrecords = \"r\"\noutput = \"o\"\n{keys}"))
    }

    #[test]
    fn targets_accept_all_a_split_or_a_list() {
        let parse = |t: &str| {
            JobFile::parse(&format!("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\ntargets = {t}\n"))
                .map(|j| j.flatten.unwrap().targets)
        };
        assert_eq!(parse("\"all\"").unwrap(), Targets::All);
        assert_eq!(parse("\"test\"").unwrap(), Targets::Splits(vec![Split::Test]));
        assert_eq!(parse("[\"train\", \"valid\"]").unwrap(), Targets::Splits(vec![Split::Train, Split::Valid]));
        assert!(parse("\"everything\"").is_err());
        assert_eq!(parse("[]").unwrap_err(), JobError::invalid("flatten", "targets lists no split"));
        assert_eq!(parse("[]").unwrap_err().to_string(), "[flatten] targets lists no split");
    }

    #[test]
    fn a_typed_graph_replaces_nodes_and_edges_and_needs_a_target_type() {
        let graph = "[graph.node_types.user]\ntable = 'u'\n[graph.node_types.item]\ntable = 'i'\n\
                     [graph.relations.buys]\nsrc = 'user'\ndst = 'item'\ntable = 'b'\nreverse = true\n";
        let job = |flatten: &str| JobFile::parse(&format!("{graph}[flatten]\noutput = 'o'\n{flatten}"));
        let typed = job("target_type = 'user'").unwrap().flatten.unwrap();
        assert_eq!(typed.typed().unwrap().0.relations.len(), 2, "buys and rev_buys");
        let err = |r: Result<JobFile, JobError>| r.unwrap_err().to_string();
        assert!(err(job("")).contains("needs target_type"));
        assert!(err(job("target_type = 'shop'")).contains("\"shop\" is not a node type"));
        assert!(err(job("target_type = 'user'\nnodes = 'n'\nedges = 'e'")).contains("tables are in [graph]"));
        let plain = JobFile::parse("[flatten]\nnodes = 'n'\nedges = 'e'\noutput = 'o'\ntarget_type = 'user'\n");
        assert!(err(plain).contains("has no [graph]"));
        assert!(err(JobFile::parse("[flatten]\noutput = 'o'\n")).contains("names no nodes and edges"));

        // A link job names its relation; its target type is the relation's source type.
        let link = job("task = 'link'\nlink_relation = 'buys'").unwrap().flatten.unwrap();
        let (graph, target) = link.typed().unwrap();
        assert_eq!(target, graph.node_type("user").unwrap());
        let buys = link.link().unwrap().relation.unwrap();
        assert_eq!(graph.relations[usize::from(buys)].name, "buys");
        assert!(err(job("task = 'link'")).contains("needs link_relation"));
        assert!(err(job("task = 'link'\nlink_relation = 'rev_buys'")).contains("is not a relation of [graph] (buys;"));
        assert!(err(job("task = 'link'\nlink_relation = 'buys'\ntarget_type = 'item'")).contains("source type"));
        assert!(job("task = 'link'\nlink_relation = 'buys'\ntarget_type = 'user'").is_ok());
        assert!(err(job("target_type = 'user'\nlink_relation = 'buys'")).contains("a key of the link task"));
        let plain =
            JobFile::parse("[flatten]\nnodes = 'n'\nedges = 'e'\noutput = 'o'\ntask = 'link'\nlink_relation = 'x'\n");
        assert!(err(plain).contains("has no [graph]"));
    }

    #[test]
    fn typed_inference_reads_the_graph_and_chooses_node_types() {
        let graph = "[graph.node_types.user]\ntable = 'u'\n[graph.node_types.item]\ntable = 'i'\n\
                     [graph.relations.buys]\nsrc = 'user'\ndst = 'item'\ntable = 'b'\n";
        let job = |infer: &str| JobFile::parse(&format!("{graph}[infer]\nmodel = 'm'\noutput = 'o'\n{infer}"));
        let infer = job("target_type = 'user'").unwrap().infer.unwrap();
        let (typed, target) = infer.typed().unwrap();
        assert_eq!(target, typed.node_type("user").unwrap());
        assert!((0..2).all(|t| infer.has_rows(&typed, t)), "every type by default");
        let items = job("target_type = 'user'\nnode_types = ['item']").unwrap().infer.unwrap();
        assert!(items.has_rows(&typed, typed.node_type("item").unwrap()));
        assert!(!items.has_rows(&typed, typed.node_type("user").unwrap()));
        let err = |r: Result<JobFile, JobError>| r.unwrap_err().to_string();
        assert!(err(job("")).contains("[infer] a typed graph needs target_type"));
        assert!(err(job("target_type = 'user'\nnode_types = ['shop']")).contains("\"shop\" is not a node type"));
        assert!(err(job("target_type = 'user'\nnode_types = []")).contains("node_types is empty"));
        let plain = "[infer]\nnodes = 'n'\nedges = 'e'\nmodel = 'm'\noutput = 'o'\nnode_types = ['user']\n";
        assert!(err(JobFile::parse(plain)).contains("the job has no [graph]"));
    }

    #[test]
    fn generate_defaults_match_the_file_defaults() {
        let g = GenerateConfig::with_output("a \"quoted\" path");
        assert_eq!(g.output, "a \"quoted\" path");
        let from_file: GenerateConfig = toml::from_str("output = 'x'").unwrap();
        assert_eq!(GenerateConfig { output: "x".into(), ..g.clone() }, from_file);
        g.check().unwrap();
    }
}
