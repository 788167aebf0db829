//! The errors a training job can end with, each with its exit [`Cause`].

use schemas::{BadInput, Cause};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record that breaks the contract: its part file, row and column are named.
    #[error(transparent)]
    BadRecord(#[from] BadInput),
    /// Reading the record set failed (the table layer says why).
    #[error(transparent)]
    Table(#[from] tables::Error),
    /// The model's files (see `gnn::io`), or the device.
    #[error(transparent)]
    Model(#[from] gnn::Error),
    /// The job asks for what its records cannot give (`[train]` settings named).
    #[error("{0}")]
    Usage(String),
    /// The records hold nothing this job can learn from.
    #[error("{0}")]
    NothingToLearn(String),
    /// The loss or the parameters stopped being finite.
    #[error("{0}")]
    Diverged(String),
    /// A checkpoint to resume from is missing or does not fit.
    #[error("{0}")]
    Resume(String),
    #[error("{0}")]
    Output(String),
    /// A bug: a helper thread died, an invariant broke.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    pub fn cause(&self) -> Cause {
        match self {
            Error::Usage(_) => Cause::Usage,
            Error::BadRecord(_) | Error::NothingToLearn(_) | Error::Diverged(_) => Cause::BadData,
            Error::Table(e) => e.cause(),
            Error::Model(e) => e.cause(),
            Error::Resume(_) => Cause::NoInput,
            Error::Output(_) => Cause::CantCreate,
            Error::Internal(_) => Cause::Internal,
        }
    }
}

/// A trainer error as it crosses between workers (see [`cluster::agree`]).
impl From<&Error> for tables::error::Report {
    fn from(e: &Error) -> Self {
        match e {
            Error::BadRecord(b) => tables::error::Report::BadInput(b.clone()),
            Error::Table(t) => t.into(),
            other => tables::error::Report::Other(other.cause(), other.to_string()),
        }
    }
}

impl From<tables::error::Report> for Error {
    fn from(r: tables::error::Report) -> Self {
        match r {
            tables::error::Report::BadInput(b) => Error::BadRecord(b),
            other => Error::Table(other.into()),
        }
    }
}

impl Error {
    /// A helper thread (`what`, joined: `None` if it never started) that ended before the end
    /// of its pass: its panic message, or what is known.
    pub(crate) fn thread_failed(what: &str, joined: Option<std::thread::Result<()>>) -> Error {
        let why = match joined {
            None => "it could not be started".to_owned(),
            Some(Ok(())) => "it stopped early".to_owned(),
            Some(Err(payload)) => schemas::message::panic_text(payload.as_ref()),
        };
        Error::Internal(format!("the {what} thread failed before the end of the pass: {why}"))
    }
}
