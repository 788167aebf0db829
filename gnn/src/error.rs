//! What loading, saving or placing a model can fail with.

use schemas::Cause;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model directory whose files are missing or do not match each other.
    #[error("{path}: {problem}")]
    Model { path: String, problem: String },
    /// A model file that exists but cannot be read as what it must be.
    #[error("{path}: {problem}")]
    Corrupt { path: String, problem: String },
    #[error("{path}: {problem}")]
    Write { path: String, problem: String },
    /// The device a job asks for cannot run here.
    #[error("{0}")]
    Device(String),
    /// Reading or writing the model's files through the table layer.
    #[error(transparent)]
    Table(#[from] tables::Error),
}

impl Error {
    pub fn cause(&self) -> Cause {
        match self {
            Error::Model { .. } => Cause::NoInput,
            Error::Corrupt { .. } => Cause::BadData,
            Error::Write { .. } => Cause::CantCreate,
            Error::Device(_) => Cause::Usage,
            Error::Table(e) => e.cause(),
        }
    }
}
