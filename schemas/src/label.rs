//! A node's training target: a class id (`label: int64`) or multi-hot targets
//! (`label: list<float32>` of 0s and 1s, one length per table), for PPI-style multi-label data.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Label {
    /// Trained with cross-entropy, scored by accuracy.
    Class(i64),
    /// One target per class in [0, 1]: trained with binary cross-entropy, scored by micro-F1.
    Targets(Vec<f32>),
}

impl Label {
    pub fn class(&self) -> Option<i64> {
        match self {
            Label::Class(c) => Some(*c),
            Label::Targets(_) => None,
        }
    }

    pub fn targets(&self) -> Option<&[f32]> {
        match self {
            Label::Class(_) => None,
            Label::Targets(t) => Some(t),
        }
    }
}

/// Which kind of label a table carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelKind {
    /// `int64` class ids (also what a table without labels is written with).
    #[default]
    Class,
    /// Multi-hot targets of this length.
    Targets(usize),
}

impl LabelKind {
    /// The kind as kept in record metadata: `class` or `targets:<n>`.
    pub fn to_text(self) -> String {
        match self {
            LabelKind::Class => "class".into(),
            LabelKind::Targets(n) => format!("targets:{n}"),
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text.split_once(':') {
            None if text == "class" => Some(LabelKind::Class),
            Some(("targets", n)) => n.parse().ok().map(LabelKind::Targets),
            _ => None,
        }
    }
}
