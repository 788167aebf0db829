//! Why a job failed, as a scheduler reads it: the process's exit code, after BSD's
//! `sysexits.h`. Whether a retry can help follows from the cause: only [`Cause::Retry`] (a
//! store or a peer that may come back) and [`Cause::Terminated`] are worth retrying unchanged.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cause {
    /// The command line or the job file is wrong (`EX_USAGE`, 64).
    Usage,
    /// Input data is bad: a row, a record, a value (`EX_DATAERR`, 65).
    BadData,
    /// An input does not exist or is not what it must be (`EX_NOINPUT`, 66).
    NoInput,
    /// A bug: a panic or a broken invariant (`EX_SOFTWARE`, 70).
    Internal,
    /// An output cannot be written (`EX_CANTCREAT`, 73).
    CantCreate,
    /// A store or a peer process failed in a way that may pass (`EX_TEMPFAIL`, 75).
    Retry,
    /// The job was stopped by a signal (128 + SIGTERM's 15).
    Terminated,
}

impl Cause {
    pub fn exit_code(self) -> i32 {
        match self {
            Cause::Usage => 64,
            Cause::BadData => 65,
            Cause::NoInput => 66,
            Cause::Internal => 70,
            Cause::CantCreate => 73,
            Cause::Retry => 75,
            Cause::Terminated => 143,
        }
    }
}
