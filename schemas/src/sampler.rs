//! The sampler: how flattening picks a node's in-edges at each hop. A job's `[flatten]` names
//! it, the records' metadata and a model's `model-<run>.json` carry it, and inference samples with it
//! again, so it lives apart from all three.

use serde::{Deserialize, Serialize};

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
