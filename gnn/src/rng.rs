//! A small deterministic random stream (splitmix64), seeded from words: dropout masks and
//! initial weights depend only on what seeds them, never on thread or worker count.

use schemas::mix::{GAMMA, mix64};

#[derive(Debug, Clone)]
pub struct Stream(u64);

impl Stream {
    pub fn new(words: &[u64]) -> Self {
        Stream(words.iter().fold(0x243f_6a88_85a3_08d3, |h, &w| mix64(h ^ mix64(w))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix64(self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        to_unit(self.next_u64())
    }

    /// What the `j`-th call of [`Stream::unit`] would return (0-based), without drawing the
    /// ones before it: splitmix64's state after `j + 1` steps is a multiple of the step away.
    pub fn unit_at(&self, j: u64) -> f32 {
        to_unit(mix64(self.0.wrapping_add(GAMMA.wrapping_mul(j + 1))))
    }
}

fn to_unit(bits: u64) -> f32 {
    (bits >> 40) as f32 / (1u64 << 24) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_at_is_the_stream_drawn_in_order() {
        let start = Stream::new(&[7, 3, 11]);
        let mut drawn = start.clone();
        for j in 0..1000 {
            assert_eq!(drawn.unit().to_bits(), start.unit_at(j).to_bits(), "draw {j}");
        }
    }
}
