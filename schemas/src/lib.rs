//! The contracts every stage shares: the Arrow schemas of the node, edge, flattened-record and
//! candidate-pair tables, their validation (errors that name file, row and column), and the job-file types.
//!
//! `README.md` beside this crate documents each table with an example row.

pub mod columns;
pub mod edge_stats;
pub mod edges;
pub mod error;
pub mod exit;
pub mod facts;
pub mod ids;
pub mod job;
pub mod label;
pub mod layers;
pub mod learned;
pub mod message;
pub mod mix;
pub mod model;
pub mod nodes;
pub mod pairs;
pub mod parts;
pub mod record;
pub mod redact;
pub mod sampler;
pub mod split;
pub mod task;
pub mod typed;

pub use error::{BadInput, Location};
pub use exit::Cause;
pub use job::{
    ClusterConfig, FlattenConfig, GenerateConfig, InferConfig, JobError, JobFile, PartitionConfig, PrecomputeConfig,
    StorageConfig, Targets,
};
pub use label::{Label, LabelKind};
pub use record::Record;
pub use redact::redact;
pub use sampler::Sampler;
pub use split::Split;
pub use task::{BatchNegatives, Decoder, NegativeSampler, Task};

/// The marker file written last into every finished output directory: the manifest of the
/// parts a reader takes (see `tables::commit`). A stage reads its input tables whole when they
/// have none (tables from other tools), and only the listed parts when they have one.
pub const SUCCESS_MARKER: &str = "_SUCCESS";
