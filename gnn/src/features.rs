//! The input rows a model reads: node features, row-normalized when the model was trained
//! with `normalize_features`, and edge features, standardized when it was trained with
//! `normalize_edge_features`. The trainer's batches and GraphInfer both call [`push_row`] and
//! [`push_edge_row`], so a node's input and an edge's features are the same bits in training
//! and in inference.

use schemas::edge_stats::EdgeStats;
use schemas::model::ModelSpec;

/// Appends feature row `x` to `out`, divided by its sum clamped below at 1 when `normalize`
/// (PyG's NormalizeFeatures, meant for non-negative features such as bag-of-words counts).
pub fn push_row(x: &[f32], normalize: bool, out: &mut Vec<f32>) {
    if normalize {
        let sum = x.iter().sum::<f32>().max(1.0);
        out.extend(x.iter().map(|v| v / sum));
    } else {
        out.extend_from_slice(x);
    }
}

/// The statistics the model with `spec` standardizes its edge rows with: `Some` when it reads
/// edge features and was trained with `normalize_edge_features`.
pub fn edge_standardization(spec: &ModelSpec) -> Option<&EdgeStats> {
    (spec.edge_dim > 0 && spec.normalize_edge_features).then_some(spec.edge_stats.as_ref()).flatten()
}

/// Appends edge feature row `e` to `out`, standardized per column by `stats` when given
/// (`(v - mean) / std`; see [`EdgeStats::push_standardized`]).
pub fn push_edge_row(e: &[f32], stats: Option<&EdgeStats>, out: &mut Vec<f32>) {
    match stats {
        Some(stats) => stats.push_standardized(e, out),
        None => out.extend_from_slice(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_divided_by_their_sum_of_at_least_one() {
        let mut out = Vec::new();
        push_row(&[1.0, 3.0], true, &mut out);
        push_row(&[0.25, 0.25], true, &mut out);
        push_row(&[2.0, 6.0], false, &mut out);
        assert_eq!(out, vec![0.25, 0.75, 0.25, 0.25, 2.0, 6.0]);
    }

    #[test]
    fn edge_rows_are_standardized_only_when_the_model_says() {
        let stats = EdgeStats { mean: vec![1.0, 2.0], std: vec![2.0, 0.0] };
        let mut out = Vec::new();
        push_edge_row(&[3.0, 5.0], Some(&stats), &mut out);
        push_edge_row(&[3.0, 5.0], None, &mut out);
        assert_eq!(out, vec![1.0, 3.0, 3.0, 5.0]);
    }
}
