//! The errors a GraphFlat job can end with.

use schemas::BadInput;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    BadInput(#[from] BadInput),
    #[error("{what}")]
    Store { what: String, source: object_store::Error },
    #[error("{file}")]
    Parquet { file: String, source: parquet::errors::ParquetError },
    #[error("{file}")]
    Arrow { file: String, source: arrow_schema::ArrowError },
    #[error("{0}")]
    Job(String),
}

impl Error {
    pub fn job(message: impl Into<String>) -> Self {
        Error::Job(message.into())
    }
}

/// An error as it crosses between workers: bad input keeps its location so every worker reports
/// the same first error; anything else travels as its message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Report {
    BadInput(BadInput),
    Other(String),
}

impl From<&Error> for Report {
    fn from(e: &Error) -> Self {
        match e {
            Error::BadInput(b) => Report::BadInput(b.clone()),
            other => {
                // Keep the whole chain: the report is all the other workers will see.
                let mut message = other.to_string();
                let mut source = std::error::Error::source(other);
                while let Some(s) = source {
                    message.push_str(&format!(": {s}"));
                    source = s.source();
                }
                Report::Other(message)
            }
        }
    }
}

impl From<Report> for Error {
    fn from(r: Report) -> Self {
        match r {
            Report::BadInput(b) => Error::BadInput(b),
            Report::Other(m) => Error::Job(m),
        }
    }
}
