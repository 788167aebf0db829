//! The losses and scores against plain-Rust formulas: cross-entropy and accuracy for classes,
//! binary cross-entropy and micro-F1 for multi-hot targets; unlabeled rows are left out.

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::model::{loss, score};
use gnn::rng::Stream;
use schemas::Label;

fn logits(rows: usize, width: usize) -> (Vec<f32>, Tensor<2>) {
    let mut s = Stream::new(&[3]);
    let values: Vec<f32> = (0..rows * width).map(|_| s.unit() * 8.0 - 4.0).collect();
    let tensor = Tensor::from_data(TensorData::new(values.clone(), [rows, width]), &Device::flex());
    (values, tensor)
}

fn value(t: Tensor<1>) -> f64 {
    f64::from(t.into_data().try_to_vec::<f32>().unwrap()[0])
}

#[test]
fn binary_cross_entropy_and_micro_f1() {
    let (rows, width) = (6, 4);
    let (x, t) = logits(rows, width);
    let labels: Vec<Option<Label>> = (0..rows)
        .map(|r| (r != 2).then(|| Label::Targets((0..width).map(|c| f32::from((r + c) % 3 == 0)).collect())))
        .collect();
    let (mut sum, mut count) = (0f64, 0);
    let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
    for (r, label) in labels.iter().enumerate() {
        let Some(Label::Targets(y)) = label else { continue };
        for c in 0..width {
            let (x, y) = (f64::from(x[r * width + c]), f64::from(y[c]));
            let p = 1.0 / (1.0 + (-x).exp());
            sum -= y * p.ln() + (1.0 - y) * (1.0 - p).ln();
            count += 1;
            match (x > 0.0, y > 0.5) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fn_ += 1,
                _ => {}
            }
        }
    }
    let (l, n) = loss(t.clone(), &labels);
    assert_eq!(n, 5);
    assert!((value(l) - sum / count as f64).abs() < 1e-5);
    assert_eq!(score(t, &labels), (2 * tp, 2 * tp + fp + fn_));
}

#[test]
fn cross_entropy_and_accuracy() {
    let (rows, width) = (5, 3);
    let (x, t) = logits(rows, width);
    let labels: Vec<Option<Label>> =
        vec![Some(Label::Class(0)), None, Some(Label::Class(2)), Some(Label::Class(1)), None];
    let (mut sum, mut correct) = (0f64, 0);
    for (r, label) in labels.iter().enumerate() {
        let Some(Label::Class(c)) = label else { continue };
        let row: Vec<f64> = x[r * width..(r + 1) * width].iter().map(|&v| f64::from(v)).collect();
        let log_total = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        sum -= row[*c as usize] - log_total;
        let best = (0..width).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
        correct += u64::from(best == *c as usize);
    }
    let (l, n) = loss(t.clone(), &labels);
    assert_eq!(n, 3);
    assert!((value(l) - sum / 3.0).abs() < 1e-5);
    assert_eq!(score(t, &labels), (correct, 3));
}
