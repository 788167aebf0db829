//! A node's split: the node table's `split` column, the records' tag, and the targets a job's
//! `[flatten]` or `[infer]` names.

use serde::{Deserialize, Serialize};

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
