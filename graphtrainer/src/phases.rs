//! Where an epoch's training steps spend their time: building batches (on the loader thread,
//! beside compute), the host's share of a step (dropout masks, the batch's copy to the device),
//! the forward and backward passes, and the parameter exchange. `timings.jsonl` and the epoch's
//! log line report them, so a slow epoch names its phase.
//!
//! On a GPU a pass is queued, not run: the forward and backward times are the host's queuing
//! (and whatever the host computes on the way, such as dropout masks), and the read, which
//! waits for the device to finish the step, is where the device's time shows.

use std::ops::AddAssign;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One epoch's step phases on one worker (worker 0's are reported), in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Phases {
    /// Turning records into batches on the loader thread (overlaps compute; what compute could
    /// not overlap is the epoch's wait).
    pub build_seconds: f64,
    /// Dropout masks drawn on the host and the batch copied to the device.
    pub tensors_seconds: f64,
    /// The forward pass (with the dropout masks of the layers after the first).
    pub forward_seconds: f64,
    /// The backward pass.
    pub backward_seconds: f64,
    /// Reading the step's results back (the loss, the scores and the gradients, in one
    /// transfer): on a GPU, the wait for the device to finish the step.
    pub read_seconds: f64,
    /// Pushing gradients to the parameter server and pulling the new parameters (and a
    /// step's histories, with control variates).
    pub exchange_seconds: f64,
    /// Control variates: refreshing every node's history after the epoch's steps.
    pub histories_seconds: f64,
}

/// A step's phase clock: [`Lap::lap`] returns the time since the last lap.
pub struct Lap(Instant);

impl Lap {
    pub fn start() -> Self {
        Lap(Instant::now())
    }

    /// Seconds since the start or the last lap.
    pub fn lap(&mut self) -> f64 {
        let now = Instant::now();
        let seconds = now.duration_since(self.0).as_secs_f64();
        self.0 = now;
        seconds
    }
}

impl Phases {
    /// The epoch log line's part: "build 1.2s, tensors 0.3s, forward 2.0s, backward 3.1s,
    /// read 0.1s, exchange 0.2s", and ", histories 0.4s" where they were refreshed.
    pub fn log_text(&self) -> String {
        let histories = match self.histories_seconds {
            0.0 => String::new(),
            s => format!(", histories {s:.2}s"),
        };
        format!(
            "build {:.2}s, tensors {:.2}s, forward {:.2}s, backward {:.2}s, read {:.2}s, exchange {:.2}s{histories}",
            self.build_seconds,
            self.tensors_seconds,
            self.forward_seconds,
            self.backward_seconds,
            self.read_seconds,
            self.exchange_seconds
        )
    }

    pub fn add_build(&mut self, d: Duration) {
        self.build_seconds += d.as_secs_f64();
    }
}

impl AddAssign for Phases {
    fn add_assign(&mut self, o: Phases) {
        self.build_seconds += o.build_seconds;
        self.tensors_seconds += o.tensors_seconds;
        self.forward_seconds += o.forward_seconds;
        self.backward_seconds += o.backward_seconds;
        self.read_seconds += o.read_seconds;
        self.exchange_seconds += o.exchange_seconds;
        self.histories_seconds += o.histories_seconds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_partition_the_elapsed_time_and_phases_add() {
        let started = Instant::now();
        let mut lap = Lap::start();
        std::thread::sleep(Duration::from_millis(5));
        let (a, b) = (lap.lap(), lap.lap());
        assert!(a >= 0.005 && b < a, "{a} {b}");
        assert!(a + b <= started.elapsed().as_secs_f64());
        let mut p = Phases { forward_seconds: 1.0, ..Phases::default() };
        p += Phases { forward_seconds: 0.5, exchange_seconds: 2.0, ..Phases::default() };
        assert_eq!((p.forward_seconds, p.exchange_seconds, p.build_seconds), (1.5, 2.0, 0.0));
        assert!(p.log_text().contains("forward 1.50s") && p.log_text().contains("exchange 2.00s"));
    }
}
