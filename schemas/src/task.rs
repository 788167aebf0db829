//! What a job learns: node classes, or links between nodes. A `[flatten]` job names it and
//! writes it into the records' metadata, `[train]` reads it from there, and `model-<run>.json`
//! carries it so that GraphInfer knows whether the model has a node head or a pair decoder.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// One record per target node; a model with a head over classes (or multi-hot targets).
    #[default]
    Node,
    /// One record per supervision edge (its endpoints' and its negatives' neighborhoods); a
    /// model that embeds nodes and a decoder that scores pairs.
    Link,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::Node => "node",
            Task::Link => "link",
        }
    }

    pub fn parse(name: &str) -> Option<Task> {
        [Task::Node, Task::Link].into_iter().find(|t| t.name() == name)
    }
}

/// How a link record's negative destinations are drawn (hash-keyed by `(seed, src, dst, i)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NegativeSampler {
    /// Every node equally likely.
    #[default]
    Uniform,
    /// Proportional to the node's in-degree (in the message-passing graph) to the power 0.75,
    /// as word2vec and PinSAGE draw negatives: popular nodes are harder negatives.
    Degree,
}

impl NegativeSampler {
    pub fn name(self) -> &'static str {
        match self {
            NegativeSampler::Uniform => "uniform",
            NegativeSampler::Degree => "degree",
        }
    }

    pub fn parse(name: &str) -> Option<NegativeSampler> {
        [NegativeSampler::Uniform, NegativeSampler::Degree].into_iter().find(|s| s.name() == name)
    }
}

/// How a link model scores a pair from its two embeddings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decoder {
    /// `h_src · h_dst`.
    #[default]
    Dot,
    /// `w2 · relu(W1 (h_src ⊙ h_dst) + b1) + b2`, `W1` square.
    Mlp,
}

impl Decoder {
    pub fn name(self) -> &'static str {
        match self {
            Decoder::Dot => "dot",
            Decoder::Mlp => "mlp",
        }
    }
}

/// Which other endpoints of its batch each positive's source is also scored against, as
/// negatives, in a link training step (`[train] batch_negatives`). The shuffle regroups the
/// records every epoch, so either kind gives each source new negatives every epoch, where a
/// record's own negatives, drawn once at flatten time, are the same every epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchNegatives {
    /// Only each record's own negatives.
    None,
    /// Every other positive's destination (in-batch negatives): a destination is drawn as often
    /// as it has in-edges, so popular nodes are the usual negatives.
    Destinations,
    /// Every other record's negatives (a pool of neighborhoods): distributed as the flatten's
    /// `negative_sampler` draws them, uniform by default, as the evaluation's negatives are.
    Negatives,
}

impl BatchNegatives {
    pub fn name(self) -> &'static str {
        match self {
            BatchNegatives::None => "none",
            BatchNegatives::Destinations => "destinations",
            BatchNegatives::Negatives => "negatives",
        }
    }
}

/// Negative destinations per positive when a link job sets none.
pub const DEFAULT_NEGATIVES: usize = 1;

/// How a link record set was made: the `[flatten]` keys of the link task, kept in the records'
/// metadata (see `crate::record::meta`).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Negative destinations per positive.
    pub negatives: usize,
    pub negative_sampler: NegativeSampler,
    /// Each training edge (both directions) is held out of its own record's message-passing
    /// edges.
    pub disjoint_train: bool,
    /// The share of supervision edges that got a record (a hash of `(seed, src, dst)` decides).
    pub supervision_fraction: f64,
    /// A typed graph's link relation (an index into the records' relations): its table's
    /// edges with a split are the supervision edges, sources of its source type, destinations
    /// and negatives of its destination type. `None` for a homogeneous graph.
    pub relation: Option<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in [Task::Node, Task::Link] {
            assert_eq!(Task::parse(t.name()), Some(t));
        }
        for s in [NegativeSampler::Uniform, NegativeSampler::Degree] {
            assert_eq!(NegativeSampler::parse(s.name()), Some(s));
        }
        assert_eq!(Task::parse("edge"), None);
    }
}
