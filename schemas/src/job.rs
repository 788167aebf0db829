//! Job files: `graphflat run job.toml` reads one of these. Every knob has a default; a table that
//! is absent is a stage that does not run. Unknown keys are errors (a typo must not be ignored).

use serde::{Deserialize, Deserializer, Serialize};

/// A whole job file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// How object stores (`s3://`) are reached; every stage of the job uses it.
    #[serde(default)]
    pub storage: StorageConfig,
    /// Generates a synthetic graph first, unless its output already holds one.
    pub generate: Option<GenerateConfig>,
    pub flatten: Option<FlattenConfig>,
    pub train: Option<TrainConfig>,
    pub infer: Option<InferConfig>,
}

impl JobFile {
    /// Parses and checks a job file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let job: JobFile = toml::from_str(text).map_err(|e| parse_error(text, &e))?;
        if let Some(flatten) = &job.flatten {
            flatten.check()?;
        }
        if let Some(train) = &job.train {
            train.check()?;
        }
        if let Some(infer) = &job.infer {
            infer.check()?;
        }
        // [cluster] is checked by the caller, after the command line's overrides.
        job.storage.check()?;
        Ok(job)
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

/// The `[storage]` table: settings of the S3 client, over the standard AWS environment
/// (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ALLOW_HTTP`, credentials). Credentials are never taken
/// from a job file: it would put secrets in files that get copied and logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// An S3-compatible endpoint (MinIO, Ceph, moto): `http://host:port`.
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    /// Allow a plain-HTTP endpoint.
    #[serde(default)]
    pub allow_http: Option<bool>,
    /// Retries of a failed request (timeouts, connection errors, 5xx), with exponential
    /// backoff from 100 ms.
    #[serde(default = "default_retries")]
    pub retries: usize,
    /// No retry starts after this many seconds since a request's first attempt.
    #[serde(default = "default_retry_timeout")]
    pub retry_timeout_s: f64,
    /// Seconds to wait for a connection.
    #[serde(default = "default_store_connect_timeout")]
    pub connect_timeout_s: f64,
    /// Seconds one request may take, its body included.
    #[serde(default = "default_request_timeout")]
    pub timeout_s: f64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            endpoint: None,
            region: None,
            allow_http: None,
            retries: default_retries(),
            retry_timeout_s: default_retry_timeout(),
            connect_timeout_s: default_store_connect_timeout(),
            timeout_s: default_request_timeout(),
        }
    }
}

impl StorageConfig {
    pub fn check(&self) -> Result<(), String> {
        let times = [self.retry_timeout_s, self.connect_timeout_s, self.timeout_s];
        if times.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
            return Err("[storage] retry_timeout_s, connect_timeout_s and timeout_s must be positive".into());
        }
        Ok(())
    }
}

fn default_retries() -> usize {
    5
}
fn default_retry_timeout() -> f64 {
    120.0
}
fn default_store_connect_timeout() -> f64 {
    5.0
}
fn default_request_timeout() -> f64 {
    60.0
}

/// Where the job runs: timely's cluster mode. The same file runs on one thread or many machines.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Worker threads per process; 0 means one per available core.
    #[serde(default)]
    pub workers: usize,
    /// How many processes take part.
    #[serde(default = "one")]
    pub processes: usize,
    /// This process's index, 0-based (usually given on the command line with `--process`).
    #[serde(default)]
    pub process: usize,
    /// `host:port` of every process, in process order. Empty: `127.0.0.1:2101`, `:2102`, ...
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Seconds a process waits for the others to connect before it gives up.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_s: u64,
    /// Seconds a process waits to hear from a connected peer before it judges the peer gone (a
    /// stopped process, a network cut without a reset) and ends the job. Every process sends a
    /// heartbeat each second on its own connection, so busy peers are never judged gone.
    #[serde(default = "default_peer_timeout")]
    pub peer_timeout_s: u64,
}

fn default_connect_timeout() -> u64 {
    60
}

fn default_peer_timeout() -> u64 {
    60
}

fn one() -> usize {
    1
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            workers: 0,
            processes: 1,
            process: 0,
            hosts: Vec::new(),
            connect_timeout_s: default_connect_timeout(),
            peer_timeout_s: default_peer_timeout(),
        }
    }
}

impl ClusterConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.processes == 0 {
            return Err("[cluster] processes must be at least 1".into());
        }
        if self.process >= self.processes {
            return Err(format!("[cluster] process {} is out of range for {} processes", self.process, self.processes));
        }
        if self.peer_timeout_s < 2 {
            return Err("[cluster] peer_timeout_s must be at least 2 (heartbeats go out every second)".into());
        }
        if !self.hosts.is_empty() && self.hosts.len() != self.processes {
            return Err(format!("[cluster] hosts lists {} entries for {} processes", self.hosts.len(), self.processes));
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
            (0..self.processes).map(|i| format!("127.0.0.1:{}", 2101 + i)).collect()
        } else {
            self.hosts.clone()
        }
    }
}

/// How to pick a node's in-edges at each hop. All are hash-keyed: the choice depends only on
/// (seed, dst, src, weight), never on worker count or message order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampler {
    /// Every in-edge (fanouts ignored).
    All,
    /// Uniform without replacement.
    Uniform,
    /// Without replacement, proportional to weight (Efraimidis-Spirakis keys).
    Weighted,
    /// The heaviest edges; ties broken by hash.
    Topk,
}

impl Sampler {
    pub fn parse(name: &str) -> Option<Sampler> {
        [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk].into_iter().find(|s| s.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Sampler::All => "all",
            Sampler::Uniform => "uniform",
            Sampler::Weighted => "weighted",
            Sampler::Topk => "topk",
        }
    }
}

/// A node's role in the train/valid/test split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Valid,
    Test,
}

impl Split {
    pub fn parse(s: &str) -> Option<Split> {
        match s {
            "train" => Some(Split::Train),
            "valid" => Some(Split::Valid),
            "test" => Some(Split::Test),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Valid => "valid",
            Split::Test => "test",
        }
    }
}

/// Which nodes get a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub enum Targets {
    /// Every node.
    #[default]
    All,
    /// The nodes whose split is one of these.
    Splits(Vec<Split>),
}

impl std::fmt::Display for Targets {
    /// As a job file spells it: `all`, or the splits joined by commas.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Targets::All => write!(f, "all"),
            Targets::Splits(s) => write!(f, "{}", s.iter().map(|s| s.name()).collect::<Vec<_>>().join(",")),
        }
    }
}

impl<'de> Deserialize<'de> for Targets {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            Splits(Vec<Split>),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Word(w) if w == "all" => Ok(Targets::All),
            Raw::Word(w) => Split::parse(&w).map(|s| Targets::Splits(vec![s])).ok_or_else(|| {
                serde::de::Error::custom(format!("targets must be \"all\" or a list of splits, found {w:?}"))
            }),
            Raw::Splits(s) => Ok(Targets::Splits(s)),
        }
    }
}

/// The `[flatten]` stage: k-hop records for every target node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlattenConfig {
    /// Node table: a Parquet file or a directory (prefix) of them; local path or URI.
    pub nodes: String,
    /// Edge table, as `nodes`.
    pub edges: String,
    /// Output directory for record part files and `_SUCCESS`.
    pub output: String,
    /// k: the number of hops, and so the number of GNN layers the records serve.
    #[serde(default = "default_hops")]
    pub hops: usize,
    /// In-edges kept per node at each hop, nearest hop first. Default: 10 per hop.
    #[serde(default)]
    pub fanouts: Option<Vec<u32>>,
    #[serde(default = "default_sampler")]
    pub sampler: Sampler,
    #[serde(default)]
    pub seed: u64,
    /// A node with more in-edges than this has them spread over several reducers by a salted
    /// key, sampled there in part and merged. 0 turns re-indexing off.
    #[serde(default = "default_hub_threshold")]
    pub hub_threshold: u64,
    #[serde(default)]
    pub targets: Targets,
    /// Targets per worker per batch. Memory is bounded by `batch_size * max_in_flight` records
    /// per worker, whatever the size of the whole output.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Batches a worker lets run at once.
    #[serde(default = "default_in_flight")]
    pub max_in_flight: usize,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run (`_SUCCESS`). Without it such a job
    /// fails and leaves the output as it was.
    #[serde(default)]
    pub overwrite: bool,
}

fn default_hops() -> usize {
    2
}
fn default_sampler() -> Sampler {
    Sampler::Uniform
}
fn default_hub_threshold() -> u64 {
    100_000
}
fn default_batch_size() -> usize {
    2048
}
fn default_in_flight() -> usize {
    2
}
fn default_part_size_mb() -> u64 {
    256
}

/// The most hops a record can serve: `edge_layers` is a 32-bit mask.
pub const MAX_HOPS: usize = 32;

impl FlattenConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.hops == 0 || self.hops > MAX_HOPS {
            return Err(format!("[flatten] hops must be between 1 and {MAX_HOPS}, found {}", self.hops));
        }
        if let Some(fanouts) = &self.fanouts {
            if fanouts.len() != self.hops {
                return Err(format!(
                    "[flatten] fanouts lists {} values for {} hops (one per hop, nearest first)",
                    fanouts.len(),
                    self.hops
                ));
            }
            if fanouts.contains(&0) {
                return Err(
                    "[flatten] a fanout of 0 would cut the neighborhood; use sampler = \"all\" for every edge".into()
                );
            }
        }
        if self.batch_size == 0 || self.max_in_flight == 0 || self.part_size_mb == 0 {
            return Err("[flatten] batch_size, max_in_flight and part_size_mb must be positive".into());
        }
        if let Targets::Splits(s) = &self.targets
            && s.is_empty()
        {
            return Err("[flatten] targets lists no split".into());
        }
        Ok(())
    }

    /// The fanout of each hop, nearest first; `u32::MAX` everywhere for the `all` sampler.
    pub fn hop_fanouts(&self) -> Vec<u32> {
        match (self.sampler, &self.fanouts) {
            (Sampler::All, _) => vec![u32::MAX; self.hops],
            (_, Some(f)) => f.clone(),
            (_, None) => vec![10; self.hops],
        }
    }

    /// The fanouts recorded in the output's metadata (empty for `all`).
    pub fn recorded_fanouts(&self) -> Vec<u32> {
        match self.sampler {
            Sampler::All => Vec::new(),
            _ => self.hop_fanouts(),
        }
    }
}

/// The `[generate]` stage (also `graphflat generate`): a synthetic graph with power-law
/// in-degrees, real hubs, planted communities and label-correlated features.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateConfig {
    /// Directory that receives `nodes/` and `edges/`.
    pub output: String,
    #[serde(default = "default_gen_nodes")]
    pub nodes: u64,
    /// Edges on average per node.
    #[serde(default = "default_gen_degree")]
    pub avg_degree: u64,
    #[serde(default = "default_gen_dim")]
    pub feature_dim: usize,
    #[serde(default = "default_gen_classes")]
    pub classes: usize,
    /// Zipf exponent of the in-degree distribution; larger makes bigger hubs.
    #[serde(default = "default_gen_skew")]
    pub skew: f64,
    /// Fraction of a node's in-edges that come from its own community.
    #[serde(default = "default_gen_homophily")]
    pub homophily: f64,
    /// Strength of the class signal in the features (noise has unit variance).
    #[serde(default = "default_gen_signal")]
    pub feature_signal: f64,
    /// Fractions of nodes in train and valid; the rest is test.
    #[serde(default = "default_gen_train")]
    pub train_fraction: f64,
    #[serde(default = "default_gen_valid")]
    pub valid_fraction: f64,
    /// Multi-hot targets (`list<float32>` labels) instead of class ids: a node's community, and
    /// for even communities the next one too.
    #[serde(default)]
    pub multi_label: bool,
    #[serde(default)]
    pub seed: u64,
}

fn default_gen_nodes() -> u64 {
    10_000
}
fn default_gen_degree() -> u64 {
    10
}
fn default_gen_dim() -> usize {
    32
}
fn default_gen_classes() -> usize {
    8
}
fn default_gen_skew() -> f64 {
    0.9
}
fn default_gen_homophily() -> f64 {
    0.8
}
fn default_gen_signal() -> f64 {
    0.5
}
fn default_gen_train() -> f64 {
    0.5
}
fn default_gen_valid() -> f64 {
    0.25
}

impl GenerateConfig {
    /// Defaults for everything but the output directory.
    pub fn with_output(output: impl Into<String>) -> Self {
        GenerateConfig {
            output: output.into(),
            nodes: default_gen_nodes(),
            avg_degree: default_gen_degree(),
            feature_dim: default_gen_dim(),
            classes: default_gen_classes(),
            skew: default_gen_skew(),
            homophily: default_gen_homophily(),
            feature_signal: default_gen_signal(),
            train_fraction: default_gen_train(),
            valid_fraction: default_gen_valid(),
            multi_label: false,
            seed: 0,
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.nodes < 2 || self.avg_degree == 0 || self.feature_dim == 0 || self.classes < 2 {
            return Err("[generate] needs nodes >= 2, avg_degree >= 1, feature_dim >= 1, classes >= 2".into());
        }
        if !((0.0..=1.0).contains(&self.homophily) && self.skew.is_finite() && self.skew > 0.0) || self.skew == 1.0 {
            return Err("[generate] homophily must be in [0, 1] and skew positive (and not exactly 1)".into());
        }
        if !(0.0..=1.0).contains(&self.train_fraction)
            || !(0.0..=1.0).contains(&self.valid_fraction)
            || self.train_fraction + self.valid_fraction > 1.0
            || !self.feature_signal.is_finite()
        {
            return Err("[generate] train_fraction + valid_fraction must be within [0, 1]".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_never_quote_a_secret() {
        for text in [
            "[storage]\nsecret_access_key = \"hunter2\"\n",
            "[storage]\nendpoint = \"http://key:hunter2@host\"\nbogus = 1\n",
            "[storage]\nendpoint = \"http://key:hunter2@host\" x\n",
        ] {
            let error = JobFile::parse(text).unwrap_err();
            assert!(!error.contains("hunter2"), "{error}");
            assert!(error.contains("line"), "{error}");
        }
    }

    #[test]
    fn defaults_fill_a_minimal_job() {
        let job = JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\n").unwrap();
        let f = job.flatten.unwrap();
        assert_eq!((f.hops, f.sampler, f.targets.clone()), (2, Sampler::Uniform, Targets::All));
        assert_eq!(f.hop_fanouts(), vec![10, 10]);
        assert_eq!(job.cluster.processes, 1);
    }

    #[test]
    fn typos_and_bad_values_are_errors() {
        assert!(JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nhopz = 2\n").is_err());
        let err =
            JobFile::parse("[flatten]\nnodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nfanouts = [1]\n").unwrap_err();
        assert!(err.contains("fanouts lists 1 values for 2 hops"), "{err}");
        assert!(JobFile::parse("[cluster]\nprocesses = 2\nprocess = 2\n").unwrap().cluster.check().is_err());
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
    }

    #[test]
    fn generate_defaults_match_the_file_defaults() {
        let g = GenerateConfig::with_output("a \"quoted\" path");
        assert_eq!(g.output, "a \"quoted\" path");
        let from_file: GenerateConfig = toml::from_str("output = 'x'").unwrap();
        assert_eq!(format!("{:?}", GenerateConfig { output: "x".into(), ..g.clone() }), format!("{from_file:?}"));
        g.check().unwrap();
    }
}

/// How the parameter server applies gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PsMode {
    /// Every step averages all workers' gradients: the same result as one worker on the
    /// combined batch.
    Sync,
    /// Each worker's gradient is applied as soon as it arrives; a worker runs at most
    /// `staleness` steps ahead of the last step every worker has finished. Not deterministic.
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    Adam,
    Sgd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// burn's Flex backend, with the edge-partitioned aggregation kernel.
    Cpu,
    /// The default wgpu adapter (Vulkan, Metal or DX12; software Vulkan works): needs a build
    /// with the `gpu` cargo feature.
    Gpu,
}

/// Which implementation aggregates neighbors (see `gnn::kernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggregation {
    /// The edge-partitioned kernel where the device supports it (the CPU), the reference
    /// elsewhere.
    #[default]
    Auto,
    /// Gather/scatter over burn tensor ops: slower on the CPU, kept as the reference.
    Reference,
}

/// The `[train]` stage: a GNN on GraphFlat's records, with a parameter server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// A finished flatten output (with `_SUCCESS`): a local path or a URI, read through
    /// object_store as GraphFlat writes it.
    pub records: String,
    /// Directory (a local path or a URI) that receives `model.bpk`, `model.json`,
    /// `metrics.jsonl`, `timings.jsonl`, checkpoints, and `_SUCCESS` last.
    pub output: String,
    /// Replace a committed model (one with `_SUCCESS`); without it the job refuses to.
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default = "default_model")]
    pub model: crate::model::ModelKind,
    #[serde(default = "default_hidden")]
    pub hidden: usize,
    /// GAT attention heads of the hidden layers (concatenated).
    #[serde(default = "default_heads")]
    pub heads: usize,
    /// GAT attention heads of the last layer (averaged; the GAT paper uses 1 on Cora).
    #[serde(default = "one")]
    pub output_heads: usize,
    #[serde(default = "default_dropout")]
    pub dropout: f32,
    /// GAT only: dropout on attention coefficients.
    #[serde(default)]
    pub attention_dropout: f32,
    #[serde(default = "default_activation")]
    pub activation: crate::model::Activation,
    /// Classes of the label; default: the largest label seen plus one.
    #[serde(default)]
    pub classes: Option<usize>,
    /// Divide each feature row by its sum clamped at 1 (PyG's NormalizeFeatures; for
    /// non-negative features such as bag-of-words).
    #[serde(default)]
    pub normalize_features: bool,
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// Records per step per worker: a step's batch over all workers is this times the workers.
    #[serde(default = "default_train_batch")]
    pub batch_size: usize,
    #[serde(default = "default_optimizer")]
    pub optimizer: OptimizerKind,
    #[serde(default = "default_lr")]
    pub lr: f32,
    #[serde(default = "default_weight_decay")]
    pub weight_decay: f32,
    /// SGD momentum.
    #[serde(default)]
    pub momentum: f32,
    /// The learning rate is multiplied by `lr_gamma` every `lr_step_epochs` epochs (0: never).
    #[serde(default = "default_gamma")]
    pub lr_gamma: f32,
    #[serde(default)]
    pub lr_step_epochs: usize,
    /// Stop after this many epochs without a better validation accuracy (0: never). The model
    /// written is the one of the best validation epoch.
    #[serde(default)]
    pub patience: usize,
    /// Layer l computes only the nodes within k - l hops of the roots.
    #[serde(default = "default_true")]
    pub prune: bool,
    /// Batches a reader thread prepares ahead of compute (0: no pipelining).
    #[serde(default = "default_prefetch")]
    pub prefetch: usize,
    /// Decoded records a process keeps between epochs, in MiB, shared among its workers; the
    /// rest is read from storage again every epoch. Evaluation batches are kept too when they
    /// fit beside the records. It changes memory and time, never results.
    #[serde(default = "default_cache_mb")]
    pub cache_mb: u64,
    /// The training shuffle buffer, in MiB per worker: each epoch visits row groups in a seeded
    /// order and draws records at random from a buffer this large.
    #[serde(default = "default_shuffle_mb")]
    pub shuffle_mb: u64,
    /// Write a checkpoint every this many epochs (0: never).
    #[serde(default)]
    pub checkpoint_every: usize,
    /// Continue from the latest checkpoint in `output`.
    #[serde(default)]
    pub resume: bool,
    #[serde(default = "default_mode")]
    pub mode: PsMode,
    /// `async` only: how many steps a worker may run ahead of the slowest.
    #[serde(default = "default_staleness")]
    pub staleness: usize,
    #[serde(default = "default_device")]
    pub device: DeviceKind,
    #[serde(default)]
    pub aggregation: Aggregation,
    /// Threads the CPU aggregation kernel uses per training worker (0: the cores divided among
    /// the process's workers).
    #[serde(default)]
    pub kernel_threads: usize,
    /// Seeds the initial weights, the shuffling and dropout.
    #[serde(default)]
    pub seed: u64,
}

fn default_model() -> crate::model::ModelKind {
    crate::model::ModelKind::Gcn
}
fn default_hidden() -> usize {
    16
}
fn default_heads() -> usize {
    8
}
fn default_dropout() -> f32 {
    0.5
}
fn default_activation() -> crate::model::Activation {
    crate::model::Activation::Relu
}
fn default_epochs() -> usize {
    200
}
fn default_train_batch() -> usize {
    512
}
fn default_optimizer() -> OptimizerKind {
    OptimizerKind::Adam
}
fn default_lr() -> f32 {
    0.01
}
fn default_weight_decay() -> f32 {
    5e-4
}
fn default_gamma() -> f32 {
    1.0
}
fn default_true() -> bool {
    true
}
fn default_prefetch() -> usize {
    4
}
fn default_cache_mb() -> u64 {
    512
}
fn default_shuffle_mb() -> u64 {
    64
}
fn default_mode() -> PsMode {
    PsMode::Sync
}
fn default_staleness() -> usize {
    2
}
fn default_device() -> DeviceKind {
    DeviceKind::Cpu
}

impl TrainConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.hidden == 0 || self.heads == 0 || self.output_heads == 0 || self.epochs == 0 || self.batch_size == 0 {
            return Err("[train] hidden, heads, output_heads, epochs and batch_size must be positive".into());
        }
        if !(0.0..1.0).contains(&self.dropout) || !(0.0..1.0).contains(&self.attention_dropout) {
            return Err("[train] dropout rates must be in [0, 1)".into());
        }
        if !(self.lr.is_finite() && self.lr > 0.0 && self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err("[train] lr must be a positive number and weight_decay a number not below 0".into());
        }
        if !(self.momentum.is_finite() && self.lr_gamma.is_finite() && self.lr_gamma > 0.0) {
            return Err("[train] momentum and lr_gamma must be numbers, lr_gamma positive".into());
        }
        if self.classes == Some(0) {
            return Err("[train] classes must be at least 1 (or left out to count them)".into());
        }
        Ok(())
    }
}

/// The `[infer]` stage (GraphInfer): scores and embeds nodes from the node and edge tables and
/// a trained model, in k + 1 rounds over the graph, without k-hop records. The sampler, fanouts
/// and seed come from the model's `model.json` (the flatten settings it was trained on), so
/// every node aggregates over the same sampled in-edges as its training record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferConfig {
    /// Node table, as in `[flatten]`.
    pub nodes: String,
    /// Edge table, as in `[flatten]`.
    pub edges: String,
    /// A training output directory (`model.json` and `model.bpk`); a local path.
    pub model: String,
    /// Output directory for the part files and `_SUCCESS`.
    pub output: String,
    /// Which layer's output is the `embedding` column, 1-based (layer k gives the logits).
    /// Default: the last hidden layer, k - 1 (k for a one-layer model).
    #[serde(default)]
    pub embedding: Option<usize>,
    /// Which nodes get a row: "all", or a list of splits. Only the nodes these need at each
    /// layer are computed.
    #[serde(default)]
    pub targets: Targets,
    /// Rows per transform on the device; every transform is padded to this many rows, so a
    /// node's result does not depend on which nodes share its batch.
    #[serde(default = "default_infer_batch")]
    pub batch_size: usize,
    #[serde(default = "default_device")]
    pub device: DeviceKind,
    /// A node whose sampled in-edges at a layer number more than this has its aggregation split
    /// over salted reducers and merged in salt order (0: never). Also the re-indexing threshold
    /// of the sampling round, as in `[flatten]`.
    #[serde(default = "default_hub_threshold")]
    pub hub_threshold: u64,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run (`_SUCCESS`), as in `[flatten]`.
    #[serde(default)]
    pub overwrite: bool,
}

fn default_infer_batch() -> usize {
    4096
}

impl InferConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.batch_size == 0 || self.part_size_mb == 0 {
            return Err("[infer] batch_size and part_size_mb must be positive".into());
        }
        if self.embedding == Some(0) {
            return Err("[infer] embedding names a layer, 1-based (1 is the first layer's output)".into());
        }
        if let Targets::Splits(s) = &self.targets
            && s.is_empty()
        {
            return Err("[infer] targets lists no split".into());
        }
        Ok(())
    }
}
