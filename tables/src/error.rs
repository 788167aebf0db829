//! What reading or writing a table can fail with; each variant knows its [`Cause`] (the exit
//! code a scheduler sees).

use schemas::{BadInput, Cause};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    BadInput(#[from] BadInput),
    #[error("{what}")]
    Store { what: String, source: object_store::Error },
    /// A file that cannot be read as Parquet.
    #[error("{file}")]
    Parquet { file: String, source: parquet::errors::ParquetError },
    /// A part that cannot be written.
    #[error("writing {file}")]
    Write { file: String, source: parquet::errors::ParquetError },
    #[error("{file}")]
    Arrow { file: String, source: arrow_schema::ArrowError },
    /// A URI whose scheme and authority are not a URL.
    #[error("{uri}: not a valid URI")]
    Uri { uri: String, source: url::ParseError },
    /// A local directory that cannot be listed.
    #[error("cannot list {dir}")]
    List { dir: String, source: std::io::Error },
    /// A JSON file this project writes (a manifest, a run marker) that does not read back.
    #[error("{file}: not a {what} this version reads")]
    Decode { file: String, what: &'static str, source: serde_json::Error },
    /// Something this project writes as JSON that cannot be encoded (a bug).
    #[error("cannot encode the {what}")]
    Encode { what: &'static str, source: serde_json::Error },
    /// A local file that cannot be opened (a missing one is 66).
    #[error("{file}")]
    Read { file: String, source: std::io::Error },
    /// A line of a text file that cannot be read (a truncated or corrupt compressed file).
    #[error("{file}, line {line}")]
    Line { file: String, line: u64, source: std::io::Error },
    /// The I/O runtime did not start.
    #[error("cannot start the I/O runtime")]
    Runtime(#[source] std::io::Error),
    /// A job setting that cannot work.
    #[error(transparent)]
    Job(#[from] schemas::JobError),
    /// A setting or a URI that cannot work.
    #[error("{0}")]
    Usage(String),
    /// An input that is missing or is not what it must be.
    #[error("{0}")]
    NoInput(String),
    /// An input the store refuses to read (a permission, a path through a file): its own
    /// error, whose cause would be a write's (see `Place::store_error`).
    #[error(transparent)]
    Unreadable(Box<Error>),
    /// An output the store refuses to write (a missing bucket): its own error, whose cause
    /// would be a missing input's.
    #[error(transparent)]
    Unwritable(Box<Error>),
    /// A problem of a whole table (an empty table, counts that disagree).
    #[error("{0}")]
    BadData(String),
    #[error("{0}")]
    Output(String),
    /// A failure that may pass on retry, as reported by another worker.
    #[error("{0}")]
    Retry(String),
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// Why the job failed, as an exit code tells it.
    pub fn cause(&self) -> Cause {
        match self {
            Error::Parquet { source, .. } => fetch_cause(source).unwrap_or(Cause::BadData),
            Error::BadInput(_) | Error::Arrow { .. } | Error::Decode { .. } | Error::BadData(_) => Cause::BadData,
            Error::Uri { .. } | Error::Job(_) => Cause::Usage,
            Error::List { source, .. } => store_cause(source).unwrap_or(Cause::CantCreate),
            Error::Read { .. } => Cause::NoInput,
            Error::Line { .. } => Cause::BadData,
            Error::Encode { .. } | Error::Runtime(_) => Cause::Internal,
            Error::Store { source, .. } => store_cause(source).unwrap_or(Cause::Retry),
            Error::NoInput(_) | Error::Unreadable(_) => Cause::NoInput,
            Error::Retry(_) => Cause::Retry,
            Error::Write { source, .. } => store_cause(source).unwrap_or(Cause::CantCreate),
            Error::Output(_) | Error::Unwritable(_) => Cause::CantCreate,
            Error::Usage(_) => Cause::Usage,
            Error::Internal(_) => Cause::Internal,
        }
    }

    /// The message with its whole chain of sources, each once (`schemas::message`), for
    /// reports that cross process borders.
    pub fn chain(&self) -> String {
        schemas::message::chain_message(schemas::message::sources(self))
    }
}

/// A failure to fetch a Parquet file's bytes, as opposed to bytes that do not decode: the
/// reader's (`crate::read`) local and store errors travel inside it, so that a row group that
/// fails to read can be told apart ([`is_fetch`]): a store that failed is the store's error (75
/// to retry, 66 for a file that is gone: `Error::cause`), never bad input. Its text is its
/// source's, which `schemas::message` prints once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Fetch {
    #[error("{0}")]
    Local(#[source] std::io::Error),
    #[error("{0}")]
    Store(#[source] object_store::Error),
}

/// Whether `error` is a failed fetch (a [`Fetch`] in its chain).
pub(crate) fn is_fetch(error: &parquet::errors::ParquetError) -> bool {
    schemas::message::sources(error).any(|e| e.is::<Fetch>())
}

/// Whether `error` is a fetch that found its object gone (a part removed while it was read).
pub(crate) fn is_missing(error: &parquet::errors::ParquetError) -> bool {
    schemas::message::sources(error).any(|e| match e.downcast_ref::<Fetch>() {
        Some(Fetch::Local(io)) => io.kind() == std::io::ErrorKind::NotFound,
        Some(Fetch::Store(store)) => matches!(store, object_store::Error::NotFound { .. }),
        None => false,
    })
}

/// The cause a store's failure tells, from the first source in `error`'s chain that says: a
/// missing object or bucket (66), a local disk that is full, read-only or not ours to write
/// (73), a remote store that failed (75, retry). `None` when nothing in the chain says.
///
/// An io error of no such kind that wraps another error (an async writer's `Other` around the
/// store's own error) is looked through: the full disk it wraps is the cause (73), not a retry.
fn store_cause(error: &(dyn std::error::Error + 'static)) -> Option<Cause> {
    use std::io::ErrorKind;
    let mut next = Some(error);
    let mut retry = false;
    while let Some(e) = next {
        next = e.source();
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::NotFound => return Some(Cause::NoInput),
                ErrorKind::PermissionDenied
                | ErrorKind::ReadOnlyFilesystem
                | ErrorKind::StorageFull
                | ErrorKind::QuotaExceeded
                | ErrorKind::FileTooLarge
                | ErrorKind::IsADirectory
                | ErrorKind::NotADirectory => return Some(Cause::CantCreate),
                // `source()` of a wrapping io error skips the error it wraps.
                _ => match io.get_ref() {
                    Some(inner) => next = Some(inner as &(dyn std::error::Error + 'static)),
                    None => return Some(Cause::Retry),
                },
            }
            retry = true;
        }
        if let Some(store) = e.downcast_ref::<object_store::Error>() {
            // The S3 client reports a missing bucket in the response body.
            if matches!(store, object_store::Error::NotFound { .. }) || store.to_string().contains("NoSuchBucket") {
                return Some(Cause::NoInput);
            }
            retry = true;
        }
    }
    retry.then_some(Cause::Retry)
}

/// The cause of a Parquet read whose bytes could not be fetched ([`Fetch`]): a file that is
/// gone or not readable (a part its manifest lists that was removed, on disk or in a store:
/// 66); a local file shorter than its manifest or footer says, cut short since it was written
/// (a corrupt file: a retry reads the same bytes, 65); otherwise a store that failed (a dropped
/// connection, an object shorter than listed, which a retry lists again: 75). `None` for bytes
/// fetched that do not parse, which the bytes themselves explain (65).
fn fetch_cause(error: &parquet::errors::ParquetError) -> Option<Cause> {
    use std::io::ErrorKind;
    if !is_fetch(error) {
        return None;
    }
    let sources = || schemas::message::sources(error);
    let cut_short = |e: &(dyn std::error::Error + 'static)| match e.downcast_ref::<Fetch>() {
        Some(Fetch::Local(io)) => io.kind() == ErrorKind::UnexpectedEof,
        _ => false,
    };
    let missing = |e: &(dyn std::error::Error + 'static)| {
        let io = e.downcast_ref::<std::io::Error>().map(|io| io.kind());
        let store = e.downcast_ref::<object_store::Error>();
        matches!(io, Some(ErrorKind::NotFound | ErrorKind::PermissionDenied))
            || matches!(store, Some(object_store::Error::NotFound { .. }))
    };
    Some(if sources().any(cut_short) {
        Cause::BadData
    } else if sources().any(missing) {
        Cause::NoInput
    } else {
        Cause::Retry
    })
}

/// An error as it crosses between workers (see `cluster::agree`): bad input keeps its location
/// so every worker reports the same first error; anything else travels as its cause and chain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Report {
    BadInput(BadInput),
    Other(Cause, String),
}

impl From<&Error> for Report {
    fn from(e: &Error) -> Self {
        match e {
            Error::BadInput(b) => Report::BadInput(b.clone()),
            other => Report::Other(other.cause(), other.chain()),
        }
    }
}

impl From<Report> for Error {
    fn from(r: Report) -> Self {
        match r {
            Report::BadInput(b) => Error::BadInput(b),
            Report::Other(Cause::BadData, m) => Error::BadData(m),
            Report::Other(Cause::NoInput, m) => Error::NoInput(m),
            Report::Other(Cause::CantCreate, m) => Error::Output(m),
            Report::Other(Cause::Usage, m) => Error::Usage(m),
            Report::Other(Cause::Retry, m) => Error::Retry(m),
            Report::Other(_, m) => Error::Internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error as IoError, ErrorKind};

    use parquet::errors::ParquetError;

    use super::*;

    /// A write that failed, as the Parquet writer reports a store's failure: the store's error
    /// inside an io error of kind `Other` (an async writer's), inside `External`.
    fn failed_write(cause: IoError) -> Error {
        let store = object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(cause) };
        Error::Write { file: "part-0.parquet".into(), source: ParquetError::External(Box::new(IoError::other(store))) }
    }

    #[test]
    fn a_full_disk_behind_a_wrapping_io_error_cannot_be_written() {
        assert_eq!(failed_write(IoError::from(ErrorKind::StorageFull)).cause(), Cause::CantCreate);
        assert_eq!(failed_write(IoError::from(ErrorKind::ReadOnlyFilesystem)).cause(), Cause::CantCreate);
    }

    #[test]
    fn a_store_failure_without_a_local_cause_is_a_retry() {
        assert_eq!(failed_write(IoError::from(ErrorKind::ConnectionReset)).cause(), Cause::Retry);
        assert_eq!(failed_write(IoError::other("503 Slow Down")).cause(), Cause::Retry);
        let bare = Error::Write { file: "p".into(), source: ParquetError::External(Box::new(IoError::other("x"))) };
        assert_eq!(bare.cause(), Cause::Retry, "an io error of no known kind, wrapping nothing a store said");
    }
}
