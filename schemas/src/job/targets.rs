//! `targets`: which nodes a stage writes a row for, as `[flatten]` and `[infer]` spell it.

use super::JobError;

use serde::{Deserialize, Deserializer, Serialize};

use crate::split::Split;

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
    /// `"all"`, one split's name, or a list of splits.
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

impl Targets {
    /// Refuses an empty list of splits: a stage with nothing to write is a mistake. `stage` is
    /// the table's name, for the message.
    pub fn check(&self, stage: &'static str) -> Result<(), JobError> {
        match self {
            Targets::Splits(s) if s.is_empty() => Err(JobError::invalid(stage, "targets lists no split")),
            _ => Ok(()),
        }
    }
}
