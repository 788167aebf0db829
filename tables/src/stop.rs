//! A stop (SIGTERM, SIGINT) and the switch: a process that is told to stop while a commit
//! switches its outputs in lets the switch finish (on a local disk it takes milliseconds)
//! and starts no new one, so a stop never leaves an output half switched, and the exit
//! message can say exactly what this process committed.
//!
//! [`Switch::enter`] brackets every switch ([`crate::commit::commit_all`]'s publishing, with
//! its take-backs); the binary's signal handler calls [`stop`], which returns once no switch
//! is in flight, with the outputs this process has committed.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::Error;

#[derive(Default)]
struct State {
    /// Switches in flight, and among them the report pages being written ([`Switch::report`]).
    in_flight: usize,
    reports: usize,
    /// Set by [`stop`]: no switch starts after it.
    stopping: bool,
    /// Every output this process committed: its place as shown and the run.
    committed: Vec<(String, String)>,
}

/// The switches of a process, and whether it is stopping.
pub struct Gate {
    state: Mutex<State>,
    done: Condvar,
}

/// This process's gate.
static GATE: Gate = Gate::new();

impl Gate {
    const fn new() -> Gate {
        let state = State { in_flight: 0, reports: 0, stopping: false, committed: Vec::new() };
        Gate { state: Mutex::new(state), done: Condvar::new() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves counts that are still right.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn enter(&'static self, report: bool) -> Result<Switch, Error> {
        let mut state = self.state();
        if state.stopping {
            return Err(Error::Retry("the job is stopping (a signal): this run's commit does not start".into()));
        }
        state.in_flight += 1;
        state.reports += usize::from(report);
        Ok(Switch(self, report))
    }

    fn stop(&self) -> Stopped {
        let mut state = self.state();
        state.stopping = true;
        let waited = state.in_flight > state.reports;
        while state.in_flight > 0 {
            state = self.done.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        Stopped { waited, committed: state.committed.clone() }
    }
}

/// A switch in flight (or a report page being written: [`Switch::report`]); dropping it ends it.
pub struct Switch(&'static Gate, bool);

impl Switch {
    /// Starts a switch, unless a stop came first: then nothing may be switched in.
    pub fn enter() -> Result<Switch, Error> {
        GATE.enter(false)
    }

    /// Starts writing the job's report page, unless a stop came first: a stop that comes while
    /// it is written waits for it, so that the stop's message can say whether it was written.
    pub fn report() -> Result<Switch, Error> {
        GATE.enter(true)
    }

    /// Records an output this switch committed.
    pub fn committed(&self, output: String, run: &str) {
        self.0.state().committed.push((output, run.to_owned()));
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight -= 1;
        state.reports -= usize::from(self.1);
        if state.in_flight == 0 {
            self.0.done.notify_all();
        }
    }
}

/// What a stop found: whether a switch was in flight (and so finished before it returned; a
/// report page being written is not a switch), and every output this process committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub waited: bool,
    pub committed: Vec<(String, String)>,
}

/// Stops switches: none starts after this call, and it returns once the ones in flight ended;
/// then the temporary directories of this process's runs on a local disk go
/// ([`crate::lease::remove_held_local`]), and the versions its switches replaced
/// ([`crate::switch::remove_pending_versions`]): the caller exits.
pub fn stop() -> Stopped {
    let stopped = GATE.stop();
    crate::lease::remove_held_local();
    crate::switch::remove_pending_versions();
    stopped
}

/// Whether a stop came (no switch starts any more): what the job does after its last commit
/// (its report) is not done either.
pub fn stopping() -> bool {
    GATE.state().stopping
}

/// How many outputs this process has committed so far.
pub fn committed_count() -> usize {
    GATE.state().committed.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop waits for the switch in flight, and refuses every later one.
    #[test]
    fn a_stop_waits_for_the_switch_and_refuses_later_ones() {
        // A gate of its own: the process's would stop the other tests' commits.
        let gate: &'static Gate = Box::leak(Box::new(Gate::new()));
        let switch = gate.enter(false).unwrap();
        let stopper = std::thread::spawn(|| gate.stop());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!stopper.is_finished(), "the stop returned while a switch was in flight");
        switch.committed("out".into(), "r1");
        drop(switch);
        let stopped = stopper.join().unwrap();
        assert!(stopped.waited);
        assert!(stopped.committed.contains(&("out".to_owned(), "r1".to_owned())));
        assert!(gate.enter(false).is_err() && gate.enter(true).is_err());
    }

    /// A stop waits for a report page being written too, and says no switch was under way.
    #[test]
    fn a_stop_waits_for_a_report_but_it_is_no_switch() {
        let gate: &'static Gate = Box::leak(Box::new(Gate::new()));
        let report = gate.enter(true).unwrap();
        let stopper = std::thread::spawn(|| gate.stop());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!stopper.is_finished(), "the stop returned while a report was being written");
        drop(report);
        assert!(!stopper.join().unwrap().waited);
    }
}
