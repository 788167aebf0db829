//! The errors a GraphFlat job can end with.

use schemas::BadInput;
use serde::{Deserialize, Serialize};

/// GraphFlat's errors are the table layer's: bad input, store and Parquet failures, and job
/// errors.
pub use tables::Error;

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
            // Keep the whole chain: the report is all the other workers will see.
            other => Report::Other(other.chain()),
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
