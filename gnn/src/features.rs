//! The input rows a model reads: node features, row-normalized when the model was trained
//! with `normalize_features`. The trainer's batches and GraphInfer's first layer both call
//! [`push_row`], so a node's input is the same bits in training and in inference.

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
}
