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

/// The stage running now, for what a stop says: its name, whether it is the job's last, and
/// how many outputs this process had committed when it began.
static RUNNING: std::sync::Mutex<Option<(&'static str, bool, usize)>> = std::sync::Mutex::new(None);

/// Records that `stage` begins (`last`: no stage of the job runs after it); where a stop came
/// during the stage before (its switch finished), the job ends with the stop's message and
/// code instead: no stage starts after a stop.
pub fn running(stage: &'static str, last: bool) {
    if let Some(code) = after_a_stop() {
        std::process::exit(code);
    }
    let mut running = RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    *running = Some((stage, last, tables::stop::committed_count()));
}

/// How long a process stopped after its job's every output committed waits for the job's own
/// end (see [`exit_on_signals`]).
const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The report pages the job wrote (under the stop's gate: `tables::stop::Switch::report`), for
/// what a stop says.
static REPORTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Records the report pages written.
pub fn reported(pages: &[String]) {
    REPORTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend_from_slice(pages);
}

/// Set by the main thread when the job failed before any stop began, and it is about to say so
/// and exit with that failure's code: a stop's signal thread then leaves the exit to it rather
/// than hide the failure behind the stop's code.
static FAILING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the job failing on its own ([`FAILING`]) unless a stop has begun; says whether it did.
pub fn failing_unless_stopped() -> bool {
    if tables::stop::stopping() {
        return false;
    }
    FAILING.store(true, std::sync::atomic::Ordering::SeqCst);
    true
}

/// The exit code a stop's message chose, once the message is on stderr; the main thread waits
/// for it ([`after_a_stop`]) so that its own end can neither cut the message off nor replace
/// the code.
static STOP_SAID: (std::sync::Mutex<Option<i32>>, std::sync::Condvar) =
    (std::sync::Mutex::new(None), std::sync::Condvar::new());

/// SIGTERM (and SIGINT) end the job with a message: a commit switching its outputs in
/// finishes first (milliseconds on a local disk) and no commit starts after the signal
/// (`tables::stop`), so every output is either this run's, whole, or the one it replaced,
/// whole; the message says which. The exit code is 143 (130 for SIGINT), or 0 when the stop
/// came during the last stage's switch, which finished: the job's every output is committed.
/// Then the job's own end (the last exchange with the other processes, which learn of the
/// commit there, and the summary) may still come, for at most [`GRACE`]: a process that left at
/// once would have its peers fail the job it committed.
pub fn exit_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) else { return };
    let _ = std::thread::Builder::new().name("graphflat-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
            let stopped = tables::stop::stop();
            delay_for_tests();
            let running = *RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let reported = REPORTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
            let (done, message) = stopped_message(name, running, &stopped, &reported);
            let _ = writeln!(std::io::stderr(), "{message}");
            let code = if signal == SIGTERM { Cause::Terminated.exit_code() } else { 130 };
            let (said, told) = &STOP_SAID;
            *said.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(if done { 0 } else { code });
            told.notify_all();
            if done || FAILING.load(std::sync::atomic::Ordering::SeqCst) {
                // The main thread's return (or its own failure's exit) ends the process before
                // this wait does.
                std::thread::sleep(GRACE);
            }
            std::process::exit(if done { 0 } else { code });
        }
    });
}

/// The variable that holds the signal thread for that many milliseconds between the stop's
/// return and its message: a loaded machine's scheduler, for `tests/switch.rs`. Unset, nothing
/// waits.
const SAY_DELAY_VAR: &str = "GRAPHFLAT_TEST_STOP_SAY_DELAY_MS";

fn delay_for_tests() {
    if let Some(ms) = std::env::var(SAY_DELAY_VAR).ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Where a stop came (its switch gate is shut), waits, for at most [`GRACE`], until the signal
/// thread has said what the stop committed, and returns the exit code it chose: the process
/// ends with that code and that message, however the main thread's job ended meanwhile (a
/// switch that finished lets the job return at once, a refused commit makes it fail). `None`
/// without a stop.
pub fn after_a_stop() -> Option<i32> {
    if !tables::stop::stopping() {
        return None;
    }
    let (said, told) = &STOP_SAID;
    let said = said.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (said, _) =
        told.wait_timeout_while(said, GRACE, |said| said.is_none()).unwrap_or_else(|poisoned| poisoned.into_inner());
    *said
}

/// What a stop says, and whether the job had committed its every output (exit 0).
fn stopped_message(
    signal: &str,
    running: Option<(&'static str, bool, usize)>,
    stopped: &tables::stop::Stopped,
    reported: &[String],
) -> (bool, String) {
    let report = match reported {
        [] => "no report was written".to_owned(),
        pages => format!("the report was written: {}", pages.join(", ")),
    };
    let (stage, last, before) = running.unwrap_or(("the job", false, stopped.committed.len()));
    let list = |outputs: &[(String, String)]| {
        outputs.iter().map(|(output, run)| format!("{output} (run {run})")).collect::<Vec<_>>().join(", ")
    };
    let (earlier, now) = stopped.committed.split_at(before.min(stopped.committed.len()));
    let how = if stopped.waited { "; its switch was under way when the signal came and finished" } else { "" };
    if !now.is_empty() {
        let after = if last { "every stage of the job committed" } else { "the stages after it did not run" };
        let message = format!("stopped by {signal} after [{stage}] committed {}{how}; {after}; {report}", list(now));
        return (last, if last { message } else { format!("error: {message}") });
    }
    let before = if earlier.is_empty() { String::new() } else { format!("; committed before it: {}", list(earlier)) };
    let message = format!(
        "error: stopped by {signal}; [{stage}] committed nothing (an output it would replace is whole as it \
         was){before}; {report}"
    );
    (false, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tables::stop::Stopped;

    fn outputs(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("out{i}"), format!("r{i}"))).collect()
    }

    #[test]
    fn a_stop_says_what_committed() {
        let stopped = Stopped { waited: true, committed: outputs(2) };
        let (done, m) = stopped_message("SIGTERM", Some(("infer", true, 1)), &stopped, &[]);
        assert!(done && m.contains("[infer] committed out1 (run r1)") && m.contains("finished"), "{m}");
        let (done, m) = stopped_message("SIGTERM", Some(("train", false, 1)), &stopped, &[]);
        assert!(!done && m.contains("did not run"), "{m}");
        let stopped = Stopped { waited: false, committed: outputs(1) };
        let (done, m) = stopped_message("SIGINT", Some(("train", true, 1)), &stopped, &[]);
        assert!(!done && m.contains("[train] committed nothing") && m.contains("before it: out0 (run r0)"), "{m}");
        assert!(m.contains("no report was written"), "{m}");
        let stopped = Stopped { waited: false, committed: outputs(1) };
        let (done, m) = stopped_message("SIGTERM", Some(("flatten", true, 0)), &stopped, &["r.html".into()]);
        assert!(done && m.contains("the report was written: r.html") && !m.contains("no report"), "{m}");
    }
}
