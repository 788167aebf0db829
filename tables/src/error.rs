//! What reading or writing a table can fail with.

use schemas::BadInput;

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

    /// The message with its whole chain of sources, for reports that cross process borders.
    pub fn chain(&self) -> String {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        message
    }
}
