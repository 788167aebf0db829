//! How the binary ends: one message on stderr and an exit code by cause (see
//! `schemas::Cause`), for errors, panics and SIGTERM alike.

use std::fmt;
use std::io::Write;

use cluster::Failure;
use schemas::Cause;

/// An error with the cause its exit code tells.
pub struct Exit {
    pub cause: Cause,
    pub error: anyhow::Error,
}

impl fmt::Debug for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message())
    }
}

impl Exit {
    pub fn new(cause: Cause, error: impl Into<anyhow::Error>) -> Self {
        Exit { cause, error: error.into() }
    }

    pub fn usage(message: impl fmt::Display) -> Self {
        Exit::new(Cause::Usage, anyhow::anyhow!("{message}"))
    }

    /// A stage's failure, with `context` leading the message.
    pub fn stage<E>(failure: Failure<E>, cause: impl Fn(&E) -> Cause, context: &'static str) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let cause = match &failure {
            Failure::Worker(e) => cause(e),
            Failure::Panic(_) => Cause::Internal,
            Failure::PeerLost(_) | Failure::Connect(_) => Cause::Retry,
            Failure::DifferentJobs(_) => Cause::Usage,
        };
        Exit { cause, error: anyhow::Error::new(failure).context(context) }
    }

    /// The error and its sources, each once (`schemas::message`), secrets in URIs (user
    /// information) redacted: they never reach the terminal, a log file or a report.
    pub fn message(&self) -> String {
        schemas::redact(&schemas::message::chain_message(self.error.chain()))
    }

    /// Prints the message (ignoring a closed stderr) and exits with the cause's code.
    pub fn exit(self) -> ! {
        let _ = writeln!(std::io::stderr(), "error: {}", self.message());
        std::process::exit(self.cause.exit_code())
    }
}

/// Any `Result` into one whose error carries `cause`.
pub trait WithCause<T> {
    fn cause(self, cause: Cause) -> Result<T, Exit>;
}

impl<T, E: Into<anyhow::Error>> WithCause<T> for Result<T, E> {
    fn cause(self, cause: Cause) -> Result<T, Exit> {
        self.map_err(|e| Exit::new(cause, e))
    }
}

/// SIGTERM (and SIGINT) end the job at once with a message: nothing is committed after it, so
/// no `_SUCCESS` appears for this run.
pub fn exit_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) else { return };
    let _ = std::thread::Builder::new().name("graphflat-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
            let _ = writeln!(
                std::io::stderr(),
                "error: stopped by {name}; the stage that was running committed nothing (stages that \
                 finished before it keep their outputs) and no report was written"
            );
            std::process::exit(if signal == SIGTERM { Cause::Terminated.exit_code() } else { 130 });
        }
    });
}
