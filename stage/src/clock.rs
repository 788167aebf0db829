//! Phase timings. Workers move through phases together (every phase ends in a collective
//! step), so one worker's clock is the job's.

use std::time::Instant;

/// Seconds spent in each phase so far, in order.
#[derive(Debug)]
pub struct Clock {
    started: Instant,
    phases: Vec<(String, f64)>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { started: Instant::now(), phases: Vec::new() }
    }
}

impl Clock {
    /// Ends the current phase, naming it: its time is what elapsed since the last lap.
    pub fn lap(&mut self, name: impl Into<String>) {
        let total: f64 = self.phases.iter().map(|p| p.1).sum();
        self.phases.push((name.into(), self.started.elapsed().as_secs_f64() - total));
    }

    /// Seconds since the clock started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The finished phases.
    pub fn phases(&self) -> &[(String, f64)] {
        &self.phases
    }

    pub fn into_phases(self) -> Vec<(String, f64)> {
        self.phases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_up_to_the_elapsed_time() {
        let mut clock = Clock::default();
        clock.lap("a");
        std::thread::sleep(std::time::Duration::from_millis(20));
        clock.lap("b");
        let phases = clock.phases();
        assert_eq!(phases.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(phases[1].1 >= 0.02 && phases[0].1 < phases[1].1);
        let total: f64 = phases.iter().map(|p| p.1).sum();
        assert!(total <= clock.started.elapsed().as_secs_f64());
    }
}
