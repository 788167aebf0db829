//! The errors a training job can end with.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Job(String),
}
