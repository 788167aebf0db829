//! Per-column statistics of the edge table's `features`, for `normalize_edge_features`: the
//! flatten job computes them over the whole edge table and writes them into the record set's
//! metadata; the trainer copies them into `model-<run>.json`, so GraphInfer standardizes every edge
//! with the same numbers without reading records.
//!
//! The sums are taken per row group and added in (file, row group) order, which every cluster
//! numbers alike: the statistics are the same bits on any number of workers.

use serde::{Deserialize, Serialize};

/// Mean and standard deviation of each edge feature column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeStats {
    pub mean: Vec<f32>,
    /// Population standard deviation; a constant column has 0 here and is only centered.
    pub std: Vec<f32>,
}

/// Sums over some rows of the edge features: count, sum and sum of squares per column (f64).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EdgeSums {
    pub rows: u64,
    pub sum: Vec<f64>,
    pub squares: Vec<f64>,
}

impl EdgeSums {
    pub fn new(dim: usize) -> Self {
        EdgeSums { rows: 0, sum: vec![0.0; dim], squares: vec![0.0; dim] }
    }

    /// Adds one row of `dim` values.
    pub fn add_row(&mut self, row: &[f32]) {
        self.rows += 1;
        for ((s, q), &v) in self.sum.iter_mut().zip(&mut self.squares).zip(row) {
            let v = f64::from(v);
            *s += v;
            *q += v * v;
        }
    }

    /// Adds another part's sums (callers add parts in a fixed order).
    pub fn merge(&mut self, other: &EdgeSums) {
        self.rows += other.rows;
        self.sum.iter_mut().zip(&other.sum).for_each(|(a, b)| *a += b);
        self.squares.iter_mut().zip(&other.squares).for_each(|(a, b)| *a += b);
    }

    pub fn stats(&self) -> EdgeStats {
        let n = self.rows.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let std = self.squares.iter().zip(&mean).map(|(q, m)| ((q / n - m * m).max(0.0)).sqrt() as f32).collect();
        EdgeStats { mean: mean.into_iter().map(|m| m as f32).collect(), std }
    }
}

impl EdgeStats {
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// `(v - mean) / std` per column (a column of std 0 is only centered), appended to `out`.
    pub fn push_standardized(&self, row: &[f32], out: &mut Vec<f32>) {
        out.extend(row.iter().zip(&self.mean).zip(&self.std).map(|((&v, &m), &s)| {
            let centered = v - m;
            if s > 0.0 { centered / s } else { centered }
        }));
    }

    /// The statistics as metadata text: comma-separated means, then stds (shortest round-trip form).
    pub fn to_text(&self) -> (String, String) {
        let join = |v: &[f32]| v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(",");
        (join(&self.mean), join(&self.std))
    }

    /// Reads [`EdgeStats::to_text`]'s output back; the part that is malformed, holds other
    /// than `dim` values or a value that is not finite (or a negative std) is the error.
    pub fn parse(mean: &str, std: &str, dim: usize) -> Result<EdgeStats, StatsPart> {
        let read = |text: &str| -> Option<Vec<f32>> {
            let values: Vec<f32> = text.split(',').map(|v| v.trim().parse().ok()).collect::<Option<_>>()?;
            (values.len() == dim && values.iter().all(|v| v.is_finite())).then_some(values)
        };
        let mean = read(mean).ok_or(StatsPart::Mean)?;
        let std = read(std).filter(|std| std.iter().all(|&s| s >= 0.0)).ok_or(StatsPart::Std)?;
        Ok(EdgeStats { mean, std })
    }
}

/// Which half of the statistics' text is wrong ([`EdgeStats::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsPart {
    Mean,
    Std,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_give_mean_and_std_and_text_round_trips() {
        let mut sums = EdgeSums::new(2);
        for row in [[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]] {
            sums.add_row(&row);
        }
        let stats = sums.stats();
        assert_eq!(stats.mean, vec![3.0, 5.0]);
        assert!((stats.std[0] - (8.0f32 / 3.0).sqrt()).abs() < 1e-6 && stats.std[1] == 0.0);
        let mut out = Vec::new();
        stats.push_standardized(&[3.0, 6.0], &mut out);
        assert_eq!(out, vec![0.0, 1.0], "a constant column is only centered");
        let (m, s) = stats.to_text();
        assert_eq!(EdgeStats::parse(&m, &s, 2), Ok(stats));
        assert_eq!(EdgeStats::parse(&m, &s, 3), Err(StatsPart::Mean));
        assert_eq!(EdgeStats::parse("1,NaN", "1,1", 2), Err(StatsPart::Mean));
        assert_eq!(EdgeStats::parse("1,1", "1,-1", 2), Err(StatsPart::Std));
        assert_eq!(EdgeStats::parse("1,1", "1", 2), Err(StatsPart::Std));
    }

    #[test]
    fn merged_parts_equal_one_pass() {
        let rows: Vec<[f32; 1]> = (0..10).map(|i| [i as f32 * 0.5]).collect();
        let mut whole = EdgeSums::new(1);
        rows.iter().for_each(|r| whole.add_row(r));
        let (mut a, mut b) = (EdgeSums::new(1), EdgeSums::new(1));
        rows[..4].iter().for_each(|r| a.add_row(r));
        rows[4..].iter().for_each(|r| b.add_row(r));
        a.merge(&b);
        assert_eq!(a, whole);
    }
}
