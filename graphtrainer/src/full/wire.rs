//! The precision a training pass's halo rows and their gradients cross at (`[train]
//! halo_precision`): `f32`, as computed, or `bf16` (bfloat16: an `f32`'s top 16 bits, rounded
//! to nearest even), half the bytes for 8 significant bits.
//!
//! bfloat16 keeps `f32`'s exponent: every value from 1.2e-38 to 3.39e38 in magnitude crosses
//! within 2^-8 of itself (IEEE half precision holds 6.1e-5 to 65504, and would flush
//! gradients below 6e-8 to zero). An `f32` beyond bfloat16's largest rounds to infinity, which
//! the trainer's check that every step is finite then refuses.
//!
//! The sender rounds, once: every reader of a row receives the same copy, and with stale
//! copies (`crate::full::stale`) the owner's "last sent" is that copy, so a row's change is
//! measured against what its readers hold. The owner's own reads of its rows stay `f32`; so
//! does the evaluation pass (the scores are the model's), and so do the split hubs' partials
//! (one row per piece). As stale copies, rounding changes the steps: the model then depends on
//! which rows cross, so on the cluster's shape.

use serde::{Deserialize, Serialize};

pub use schemas::job::train::HaloPrecision as Precision;

/// Values as they cross the wire, at a [`Precision`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Values {
    F32(Vec<f32>),
    /// bfloat16 bit patterns.
    Bf16(Vec<u16>),
}

impl Values {
    /// `values` at `precision`.
    pub fn encode(values: Vec<f32>, precision: Precision) -> Values {
        match precision {
            Precision::F32 => Values::F32(values),
            Precision::Bf16 => Values::Bf16(values.into_iter().map(|v| half::bf16::from_f32(v).to_bits()).collect()),
        }
    }

    /// The values as `f32` (a bfloat16 widens exactly).
    pub fn decode(self) -> Vec<f32> {
        match self {
            Values::F32(values) => values,
            Values::Bf16(bits) => bits.into_iter().map(|b| half::bf16::from_bits(b).to_f32()).collect(),
        }
    }
}

/// Bytes a value takes on the wire.
pub fn value_bytes(precision: Precision) -> usize {
    match precision {
        Precision::F32 => 4,
        Precision::Bf16 => 2,
    }
}

/// Rounds `values` in place to what a reader receives of them at `precision`.
pub fn round(values: &mut [f32], precision: Precision) {
    if precision == Precision::Bf16 {
        values.iter_mut().for_each(|v| *v = half::bf16::from_f32(*v).to_f32());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values across f32's range: a few that bfloat16 holds exactly, the rest rounded.
    fn samples() -> Vec<f32> {
        let mut values = vec![0.0, -0.0, 1.0, -2.5, 0.15625, 3.0e38, -1.0e-37, 1.0e-30, f32::MIN_POSITIVE];
        values.extend((1..200).map(|i| (i as f32 * 0.7371).sin() * 10f32.powi(i % 13 - 6)));
        values
    }

    #[test]
    fn bf16_moves_each_value_by_at_most_2_to_the_minus_8_of_itself_and_keeps_its_range() {
        let values = samples();
        let crossed = Values::encode(values.clone(), Precision::Bf16).decode();
        for (v, c) in values.iter().zip(&crossed) {
            assert!((v - c).abs() <= v.abs() * 2f32.powi(-8), "{v} crossed as {c}");
            assert!(c.is_finite() && (*v == 0.0) == (*c == 0.0), "{v} crossed as {c}");
        }
        // Exactly held values cross unchanged; rounding what was rounded changes nothing.
        assert_eq!(crossed[..5], values[..5]);
        let mut again = crossed.clone();
        round(&mut again, Precision::Bf16);
        assert_eq!(again, crossed, "a value is rounded once");
        // What a reader receives is what `round` gives the sender.
        let mut rounded = values.clone();
        round(&mut rounded, Precision::Bf16);
        assert_eq!(rounded, crossed);
    }

    #[test]
    fn f32_crosses_exactly_at_four_bytes_a_value() {
        let values = samples();
        let mut same = values.clone();
        round(&mut same, Precision::F32);
        assert_eq!(Values::encode(values.clone(), Precision::F32).decode(), values);
        assert_eq!(same, values);
        assert_eq!((value_bytes(Precision::F32), value_bytes(Precision::Bf16)), (4, 2));
    }
}
