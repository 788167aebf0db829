//! Link models' decoders: how a pair `(s, d)` is scored from the two embeddings `h_s`, `h_d`
//! (the encoder's last layer, no activation after it).
//!
//! - `dot`: `h_s . h_d`, no parameters;
//! - `mlp`: `w2 . relu(W1 (h_s * h_d) + b1) + b2` with `W1` square (`d x d`). It is stored
//!   as `w1 = W1^T` (`[d, d]`, rows multiply inputs, as the layers store their weights), `b1`
//!   (`[d]`), `w2` (`[d, 1]`), `b2` (`[1]`), seeded like the layers' parameters, and lives in
//!   the model ([`crate::Gnn::decoder`]): the parameter server, checkpoints and `model.bpk`
//!   carry it with the encoder's parameters, after them.
//!
//! The tensor functions run in training and evaluation (any backend, with autodiff);
//! [`PairScorer`] computes the same score on the host from two embedding rows, for GraphInfer.

use burn::prelude::*;
use burn::tensor::activation::relu;
use schemas::model::ModelSpec;
use schemas::task::Decoder;

use crate::layers::{glorot, zeros};

/// The seed word of the decoder's parameters (after the model's seed).
const DECODER_SEED: u64 = 0xdec0de;

/// The `mlp` decoder's parameters.
#[derive(Module, Debug)]
pub struct MlpDecoder {
    /// `W1^T`, `[d, d]`.
    pub w1: burn::module::Param<Tensor<2>>,
    pub b1: burn::module::Param<Tensor<1>>,
    /// `[d, 1]`.
    pub w2: burn::module::Param<Tensor<2>>,
    pub b2: burn::module::Param<Tensor<1>>,
}

impl MlpDecoder {
    /// Glorot weights and zero biases for embeddings `dim` wide.
    pub fn new(dim: usize, seed: u64, device: &Device) -> Self {
        let (first, second) = ([seed, DECODER_SEED, 0], [seed, DECODER_SEED, 1]);
        MlpDecoder {
            w1: glorot(dim, dim, &first, device),
            b1: zeros(dim, &first, device),
            w2: glorot(dim, 1, &second, device),
            b2: zeros(1, &second, device),
        }
    }

    /// Scores of rows of products `h_s * h_d`, `[pairs, d]` -> `[pairs]`.
    fn score_products(&self, products: Tensor<2>) -> Tensor<1> {
        let hidden = relu(products.matmul(self.w1.val()) + self.b1.val().unsqueeze::<2>());
        let out = hidden.matmul(self.w2.val()) + self.b2.val().unsqueeze::<2>();
        let pairs = out.dims()[0];
        out.reshape([pairs])
    }
}

/// The decoder of a link model's spec: its kind and, for `mlp`, the model's parameters.
#[derive(Clone, Copy)]
pub struct PairDecoder<'a> {
    pub kind: Decoder,
    pub mlp: Option<&'a MlpDecoder>,
}

impl<'a> PairDecoder<'a> {
    /// The decoder of a model (`spec.decoder`, `dot` when the spec names none) with its mlp
    /// parameters (`Gnn::decoder`).
    pub fn of(spec: &ModelSpec, mlp: Option<&'a MlpDecoder>) -> Self {
        PairDecoder { kind: spec.decoder.unwrap_or_default(), mlp }
    }

    fn mlp(&self) -> &'a MlpDecoder {
        self.mlp.expect("an mlp decoder's model holds its parameters (built from a spec with decoder = mlp)")
    }

    /// The score of each pair of rows: `src[i]` with `dst[i]`, both `[pairs, d]` -> `[pairs]`.
    pub fn score(&self, src: Tensor<2>, dst: Tensor<2>) -> Tensor<1> {
        let products = src * dst;
        match self.kind {
            Decoder::Dot => {
                let pairs = products.dims()[0];
                products.sum_dim(1).reshape([pairs])
            }
            Decoder::Mlp => self.mlp().score_products(products),
        }
    }

    /// The score of every source row with every destination row: `[n, d]` and `[m, d]` ->
    /// `[n, m]`. For `mlp` this holds `n * m * d` products at once.
    pub fn score_all(&self, src: Tensor<2>, dst: Tensor<2>) -> Tensor<2> {
        let ([n, d], m) = (src.dims(), dst.dims()[0]);
        match self.kind {
            Decoder::Dot => src.matmul(dst.transpose()),
            Decoder::Mlp => {
                let products = src.reshape([n, 1, d]) * dst.reshape([1, m, d]);
                self.mlp().score_products(products.reshape([n * m, d])).reshape([n, m])
            }
        }
    }
}

/// A link model's decoder on the host: scores a pair from two embedding rows, as the trainer's
/// [`PairDecoder::score`] does (to float rounding). GraphInfer calls it for candidate pairs.
#[derive(Debug, Clone, PartialEq)]
pub enum PairScorer {
    Dot,
    Mlp {
        dim: usize,
        /// Row-major `[d, d]`: `w1[i * d + j]` multiplies input `i` into hidden unit `j`.
        w1: Vec<f32>,
        b1: Vec<f32>,
        w2: Vec<f32>,
        b2: f32,
    },
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("parameters are f32")
}

impl PairScorer {
    /// The decoder of a loaded link model (see `crate::io::load`) with its mlp parameters
    /// (`Gnn::decoder`); `dot` for a spec without one.
    pub fn of(spec: &ModelSpec, mlp: Option<&MlpDecoder>) -> Self {
        match (spec.decoder.unwrap_or_default(), mlp) {
            (Decoder::Mlp, Some(m)) => PairScorer::Mlp {
                dim: spec.classes,
                w1: values(m.w1.val()),
                b1: values(m.b1.val()),
                w2: values(m.w2.val()),
                b2: values(m.b2.val())[0],
            },
            (Decoder::Mlp, None) => panic!("an mlp decoder's model holds its parameters"),
            (Decoder::Dot, _) => PairScorer::Dot,
        }
    }

    /// The score of `(s, d)` from their embeddings (both the model's embedding width).
    pub fn score(&self, src: &[f32], dst: &[f32]) -> f32 {
        match self {
            PairScorer::Dot => src.iter().zip(dst).map(|(a, b)| a * b).sum(),
            PairScorer::Mlp { dim, w1, b1, w2, b2 } => {
                let mut hidden = b1.clone();
                for (i, (a, b)) in src.iter().zip(dst).enumerate() {
                    let x = a * b;
                    hidden.iter_mut().zip(&w1[i * dim..(i + 1) * dim]).for_each(|(h, w)| *h += x * w);
                }
                hidden.iter().zip(w2).map(|(h, w)| h.max(0.0) * w).sum::<f32>() + b2
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    fn rows(values: &[f32], d: usize, device: &Device) -> Tensor<2> {
        Tensor::from_data(TensorData::new(values.to_vec(), [values.len() / d, d]), device)
    }

    /// The tensor decoder, the all-pairs grid and the host scorer agree, for both kinds.
    #[test]
    fn tensor_grid_and_host_scores_agree() {
        let device = Device::flex();
        let d = 5;
        let mut s = crate::rng::Stream::new(&[4]);
        let a: Vec<f32> = (0..3 * d).map(|_| s.unit() - 0.5).collect();
        let b: Vec<f32> = (0..4 * d).map(|_| s.unit() - 0.5).collect();
        let mlp = MlpDecoder::new(d, 7, &device);
        // Non-zero biases, so that they are checked too.
        let b1: Vec<f32> = (0..d).map(|_| s.unit() - 0.5).collect();
        let mlp = MlpDecoder { b1: burn::module::Param::from_tensor(rows(&b1, d, &device).reshape([d])), ..mlp };
        for (kind, decoder) in [(Decoder::Dot, None), (Decoder::Mlp, Some(&mlp))] {
            let pairs = PairDecoder { kind, mlp: decoder };
            let grid: Vec<f32> = values(pairs.score_all(rows(&a, d, &device), rows(&b, d, &device)));
            let host = match decoder {
                None => PairScorer::Dot,
                Some(m) => PairScorer::Mlp {
                    dim: d,
                    w1: values(m.w1.val()),
                    b1: values(m.b1.val()),
                    w2: values(m.w2.val()),
                    b2: values(m.b2.val())[0],
                },
            };
            for i in 0..3 {
                let repeated: Vec<f32> = (0..4).flat_map(|_| a[i * d..(i + 1) * d].to_vec()).collect();
                let row: Vec<f32> = values(pairs.score(rows(&repeated, d, &device), rows(&b, d, &device)));
                for j in 0..4 {
                    let expected = host.score(&a[i * d..(i + 1) * d], &b[j * d..(j + 1) * d]);
                    assert!((grid[i * 4 + j] - expected).abs() < 1e-5, "{kind:?} grid ({i}, {j})");
                    assert!((row[j] - expected).abs() < 1e-5, "{kind:?} pair ({i}, {j})");
                }
            }
        }
    }
}
