//! Waiting for the dataflow, bounded. A worker parked in timely's `step_or_park(None)` sleeps
//! until a message arrives, which never happens once a peer worker has failed: every wait of
//! every stage goes through [`wait_while`], which parks for at most [`POLL`] at a time and then
//! checks whether the job is aborting (another worker of this process failed, or a connection
//! to a peer process was lost). An aborting wait unwinds with [`Aborted`], which
//! [`crate::execute`] recognizes; `resume_unwind` skips the panic hook, so it prints nothing.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use timely::worker::Worker;

/// How long a waiting worker parks before it checks for an abort.
pub const POLL: Duration = Duration::from_millis(50);

/// The unwind payload of a worker that stopped because the job is aborting.
#[derive(Debug)]
pub struct Aborted;

thread_local! {
    /// The job's abort flag, set on each worker thread by [`crate::execute`].
    static ABORT: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Set when a peer process is gone: a thread of timely's communication layer panicked, or
/// [`crate::heartbeat`] heard nothing from the peer for too long.
pub(crate) static PEER_LOST: AtomicBool = AtomicBool::new(false);

/// Why the first peer was lost, for the failure report.
static LOST_BECAUSE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Marks a peer process lost, keeping the first reason; every waiting worker then aborts.
pub(crate) fn peer_lost(because: String) {
    LOST_BECAUSE.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(because);
    PEER_LOST.store(true, Ordering::Relaxed);
}

/// The first reason a peer was lost.
pub(crate) fn lost_because() -> String {
    LOST_BECAUSE.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_else(|| "a connection closed".into())
}

pub(crate) fn set_abort_flag(flag: Arc<AtomicBool>) {
    ABORT.with(|a| *a.borrow_mut() = Some(flag));
}

/// Whether this worker's job is ending because of a failure elsewhere.
pub fn aborting() -> bool {
    PEER_LOST.load(Ordering::Relaxed) || ABORT.with(|a| a.borrow().as_ref().is_some_and(|f| f.load(Ordering::Relaxed)))
}

/// Unwinds this worker if the job is aborting. Long computations between waits may call it.
pub fn check_abort() {
    if aborting() {
        std::panic::resume_unwind(Box::new(Aborted));
    }
}

/// Steps the worker while `busy()` holds, parking at most [`POLL`] at a time; unwinds with
/// [`Aborted`] when the job is aborting.
pub fn wait_while(worker: &mut Worker, mut busy: impl FnMut() -> bool) {
    while busy() {
        worker.step_or_park(Some(POLL));
        check_abort();
    }
}
