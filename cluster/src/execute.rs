//! Running a stage on every worker of this process, failing fast.
//!
//! Every worker runs the stage's closure under `catch_unwind` and reports its outcome on a
//! channel; the calling thread collects the outcomes instead of joining the threads. The first
//! failure (an error, a panic, a lost peer process) sets the job's abort flag, which every
//! worker sees within [`crate::wait::POLL`] at its next wait; the caller returns that failure
//! after the other workers have stopped or after [`GRACE`], whichever is first, and after the
//! connections to the peer processes have ended (see `release`). Threads still running then
//! are left behind: the binary exits the process on any failure.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use schemas::ClusterConfig;
use schemas::message::panic_text;
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
use timely::communication::{Config as CommunicationConfig, Hooks, WorkerGuards};
use timely::worker::Worker;

use crate::connect::ConnectError;
use crate::wait::{Aborted, PEER_LOST, lost_because, peer_lost, set_abort_flag};

/// How long the other workers of a process get to stop after one failed.
pub const GRACE: Duration = Duration::from_secs(5);

/// Why a job ended early.
#[derive(Debug)]
pub enum Failure<E> {
    /// A worker's own error (the first reported).
    Worker(E),
    /// A worker panicked: a bug. The message names where.
    Panic(String),
    /// A peer process is gone: a connection to it closed (it ended; its own log says why) or it
    /// sent no heartbeat for `[cluster] peer_timeout_s`.
    PeerLost(String),
    /// The processes of the cluster could not connect.
    Connect(String),
    /// The processes read different jobs (`crate::connect`): the job files must agree.
    DifferentJobs(String),
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Worker(e) => write!(f, "{e}"),
            Failure::Panic(m) => write!(f, "internal error (a bug; please report it): {m}"),
            Failure::PeerLost(m) => write!(f, "lost a peer process of the cluster: {m}"),
            Failure::Connect(m) | Failure::DifferentJobs(m) => write!(f, "{m}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Failure<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::Worker(e) => e.source(),
            _ => None,
        }
    }
}

impl<E> Failure<E> {
    /// The same failure with the worker's error mapped.
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> Failure<F> {
        match self {
            Failure::Worker(e) => Failure::Worker(f(e)),
            Failure::Panic(m) => Failure::Panic(m),
            Failure::PeerLost(m) => Failure::PeerLost(m),
            Failure::Connect(m) => Failure::Connect(m),
            Failure::DifferentJobs(m) => Failure::DifferentJobs(m),
        }
    }
}

enum Outcome<T, E> {
    Done(T),
    Failed(E),
    Panicked(String),
    Aborted,
}

thread_local! {
    /// The last panic on this thread, with its location, recorded by the panic hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Whether this thread has panicked for a lost peer (see `install_panic_hook`).
    static PANICKED_FOR_PEER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs the process's panic hook: a panic's message and location are kept for the failure
/// report instead of printed (the report is the one message a user sees); with `RUST_BACKTRACE`
/// set, the default report with its backtrace is printed as well. A panic on one of timely's
/// communication threads marks the peer connection lost, which aborts every waiting worker.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = panic_text(info.payload());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current().name().unwrap_or("").to_owned();
        let lost = message.starts_with("timely communication error")
            || thread.starts_with("timely:send")
            || thread.starts_with("timely:recv");
        if lost || PEER_LOST.load(Ordering::Relaxed) {
            // A peer that went away is not a bug, nor are the panics it causes on the workers
            // (timely's queues poisoned): the failure report says so, without a trace.
            peer_lost(format!(
                "a connection closed, so the process at its other end ended; its log says why ({message})"
            ));
            // A second panic here is one raised while this thread unwinds from the first
            // (timely's structures panic again as they drop on a dead connection). It cannot
            // unwind: the runtime would abort the process (SIGABRT, exit 134), which a
            // scheduler reads as a crash. The thread waits instead; `execute` sees the lost
            // peer and ends the job with its exit code after `GRACE`.
            if PANICKED_FOR_PEER.replace(true) {
                loop {
                    std::thread::park();
                }
            }
            return;
        }
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            default(info);
        }
    }));
}

/// timely's allocators for this process: one thread, several, or a cluster process whose
/// connections are made by [`crate::connect`] within the configured timeout and watched by
/// [`crate::heartbeat`] (its threads stop when timely drops the returned guard).
fn allocators(cluster: &ClusterConfig) -> Result<(Vec<AllocatorBuilder>, Box<dyn Any + Send>), ConnectError> {
    let threads = cluster.threads();
    if cluster.processes <= 1 {
        let config = if threads == 1 { CommunicationConfig::Thread } else { CommunicationConfig::Process(threads) };
        return Ok(config.try_build()?);
    }
    let addresses = cluster.addresses();
    let timeout = Duration::from_secs(cluster.connect_timeout_s);
    let connections = crate::connect::connect(&addresses, cluster.process, cluster.job, timeout)?;
    let heartbeats =
        crate::heartbeat::start(connections.heartbeat, &addresses, Duration::from_secs(cluster.peer_timeout_s))
            .map_err(|e| format!("cannot start the heartbeats between processes: {e}"))?;
    let sockets = connections.data;
    let hooks = Hooks::default();
    let local = ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) = initialize_networking_from_sockets(local, sockets, cluster.process, threads, hooks)
        .map_err(|e| format!("cannot start the cluster's connections: {e}"))?;
    Ok((builders.into_iter().map(AllocatorBuilder::Tcp).collect(), Box::new((guard, heartbeats))))
}

/// Runs `work` on every worker of this process and returns their results in worker order, or
/// the job's first failure. See the module documentation for how a failure ends the others.
pub fn execute<T, E, F>(cluster: &ClusterConfig, work: F) -> Result<Vec<T>, Failure<E>>
where
    T: Send + 'static,
    E: Send + 'static,
    F: Fn(&mut Worker) -> Result<T, E> + Send + Sync + 'static,
{
    let (builders, others) = allocators(cluster).map_err(|e| match e {
        ConnectError::Unreached(m) => Failure::Connect(m),
        ConnectError::DifferentJobs(m) => Failure::DifferentJobs(m),
    })?;
    let threads = builders.len();
    let abort = Arc::new(AtomicBool::new(false));
    let (report, outcomes) = mpsc::channel::<(usize, Outcome<T, E>)>();
    let flag = abort.clone();
    let guards = timely::execute::execute_from(builders, others, Default::default(), move |worker| {
        set_abort_flag(flag.clone());
        let outcome = match catch_unwind(AssertUnwindSafe(|| work(worker))) {
            Ok(Ok(value)) => Outcome::Done(value),
            Ok(Err(e)) => Outcome::Failed(e),
            Err(payload) if payload.is::<Aborted>() => Outcome::Aborted,
            Err(payload) => Outcome::Panicked(
                LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| panic_text(payload.as_ref())),
            ),
        };
        if !matches!(outcome, Outcome::Done(_)) {
            flag.store(true, Ordering::Relaxed);
        }
        let _ = report.send((worker.index() % threads, outcome));
    })
    .map_err(|e| Failure::Connect(format!("cannot start the timely workers: {e}")))?;

    let (results, failure, heard) = gather(&outcomes, threads, &abort);
    if let Some(failure) = failure {
        // A lost peer never ends its connections cleanly: waiting for it would only delay the exit.
        release(guards, heard == threads && !PEER_LOST.load(Ordering::Relaxed));
        return Err(failure);
    }
    if heard < threads {
        release(guards, false);
        return Err(Failure::Panic("a worker thread ended without reporting".into()));
    }
    drop(guards.join());
    Ok(results.into_iter().map(|r| r.expect("every worker reported")).collect())
}

/// Lets a failed job's threads end before the process exits, for at most [`GRACE`]. With
/// every worker of this process ended (`join`), joining flushes what they sent and
/// ends the connections cleanly, which timely does only once every peer's workers ended too:
/// a failure all processes agreed on (`crate::collective::agree`) then reaches each of them
/// as that failure, not as a peer's closed connection (which it would be if this process
/// exited with the peer's last messages unsent). A peer still working after [`GRACE`] hears
/// of the exit from [`crate::heartbeat`]. With a worker still running, joining could wait
/// forever, so the threads are left behind, as they are after a lost peer.
fn release<T: Send + 'static>(guards: WorkerGuards<T>, join: bool) {
    if !join {
        std::mem::forget(guards);
        return;
    }
    let (ended, joined) = mpsc::channel();
    let held = Arc::new(std::sync::Mutex::new(Some(guards)));
    let in_thread = held.clone();
    let spawned = std::thread::Builder::new().name("cluster:release".into()).spawn(move || {
        if let Some(guards) = in_thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            drop(guards.join());
        }
        let _ = ended.send(());
    });
    match spawned {
        Ok(_) => drop(joined.recv_timeout(GRACE)),
        Err(_) => std::mem::forget(held.lock().unwrap_or_else(|p| p.into_inner()).take()),
    }
}

/// Every worker's report, as they come: each one's value, the job's failure, and how many
/// reported. The first failure raises `abort`, which ends the others; a worker's own error
/// says more than the peer losses it causes, and wins over them. It waits at most [`GRACE`]
/// after the first failure, and notices a lost peer while no worker reports.
fn gather<T, E>(
    outcomes: &mpsc::Receiver<(usize, Outcome<T, E>)>,
    threads: usize,
    abort: &AtomicBool,
) -> (Vec<Option<T>>, Option<Failure<E>>, usize) {
    let mut results: Vec<Option<T>> = (0..threads).map(|_| None).collect();
    let (mut failure, mut failed_at, mut heard) = (None, None::<Instant>, 0);
    while heard < threads {
        if failed_at.is_some_and(|t| t.elapsed() > GRACE) {
            break;
        }
        let (worker, outcome) = match outcomes.recv_timeout(crate::wait::POLL) {
            Ok(received) => received,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if PEER_LOST.load(Ordering::Relaxed) && failure.is_none() {
                    abort.store(true, Ordering::Relaxed);
                    failure = Some(Failure::PeerLost(lost_because()));
                    failed_at = Some(Instant::now());
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        heard += 1;
        let this = match outcome {
            Outcome::Done(value) => {
                results[worker] = Some(value);
                continue;
            }
            Outcome::Failed(e) => Failure::Worker(e),
            Outcome::Panicked(_) if PEER_LOST.load(Ordering::Relaxed) => Failure::PeerLost(lost_because()),
            Outcome::Panicked(m) => Failure::Panic(m),
            Outcome::Aborted if PEER_LOST.load(Ordering::Relaxed) => Failure::PeerLost(lost_because()),
            Outcome::Aborted => continue,
        };
        abort.store(true, Ordering::Relaxed);
        failed_at.get_or_insert_with(Instant::now);
        // A worker's own error says more than the peer losses it causes.
        if failure.is_none() || (matches!(this, Failure::Worker(_)) && !matches!(failure, Some(Failure::Worker(_)))) {
            failure = Some(this);
        }
    }
    (results, failure, heard)
}
