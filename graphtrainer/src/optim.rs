//! The optimizers that run on the parameter-server shards: each owns a contiguous slice of the
//! flat parameter vector and its state.

use schemas::job::{OptimizerKind, TrainConfig};
use serde::{Deserialize, Serialize};

/// One shard's optimizer state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardOptimizer {
    kind: OptimizerKind,
    weight_decay: f32,
    momentum: f32,
    /// Adam's first and second moments (or SGD's velocity in `m`).
    m: Vec<f32>,
    v: Vec<f32>,
    /// Updates applied so far.
    pub steps: u64,
}

impl ShardOptimizer {
    /// `weight_decay`: the run's (see `crate::task_keys`).
    pub fn new(config: &TrainConfig, weight_decay: f32, len: usize) -> Self {
        ShardOptimizer {
            kind: config.optimizer,
            weight_decay,
            momentum: config.momentum,
            m: vec![0.0; len],
            v: if config.optimizer == OptimizerKind::Adam { vec![0.0; len] } else { Vec::new() },
            steps: 0,
        }
    }

    /// One update of `params` with the (mean) gradient `grad` at learning rate `lr`. Weight
    /// decay is L2 added to the gradient (as PyTorch's `weight_decay`).
    pub fn step(&mut self, params: &mut [f32], grad: &[f32], lr: f32) {
        self.steps += 1;
        let wd = self.weight_decay;
        match self.kind {
            OptimizerKind::Adam => {
                let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
                let t = self.steps as i32;
                let (c1, c2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
                for i in 0..params.len() {
                    let g = grad[i] + wd * params[i];
                    self.m[i] = b1 * self.m[i] + (1.0 - b1) * g;
                    self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g;
                    params[i] -= lr * (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + eps);
                }
            }
            OptimizerKind::Sgd => {
                for i in 0..params.len() {
                    let g = grad[i] + wd * params[i];
                    self.m[i] = self.momentum * self.m[i] + g;
                    params[i] -= lr * self.m[i];
                }
            }
        }
    }
}

/// The learning rate at `epoch` (0-based): `lr * gamma^(epoch / step_epochs)`.
pub fn learning_rate(config: &TrainConfig, epoch: usize) -> f32 {
    let decays = epoch.checked_div(config.lr_step_epochs).unwrap_or(0);
    config.lr * config.lr_gamma.powi(decays as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: &str) -> TrainConfig {
        toml::from_str(&format!("records = 'r'\noutput = 'o'\noptimizer = '{kind}'\nweight_decay = 0.0\n")).unwrap()
    }

    /// Adam on f(x) = (x - 3)^2 from 0 converges; SGD with lr 0.1 too.
    #[test]
    fn optimizers_minimize_a_quadratic() {
        for kind in ["adam", "sgd"] {
            let c = config(kind);
            let mut opt = ShardOptimizer::new(&c, 0.0, 1);
            let mut x = [0.0f32];
            for _ in 0..2000 {
                let g = [2.0 * (x[0] - 3.0)];
                opt.step(&mut x, &g, 0.05);
            }
            assert!((x[0] - 3.0).abs() < 1e-2, "{kind}: {}", x[0]);
        }
    }

    /// The first Adam step moves each parameter by lr in the direction against the gradient.
    #[test]
    fn first_adam_step_is_lr_sized() {
        let mut opt = ShardOptimizer::new(&config("adam"), 0.0, 2);
        let mut x = [1.0f32, 1.0];
        opt.step(&mut x, &[0.5, -2.0], 0.01);
        assert!((x[0] - 0.99).abs() < 1e-6 && (x[1] - 1.01).abs() < 1e-6, "{x:?}");
    }

    #[test]
    fn step_schedule() {
        let mut c = config("sgd");
        (c.lr, c.lr_gamma, c.lr_step_epochs) = (0.1, 0.5, 10);
        assert_eq!(learning_rate(&c, 9), 0.1);
        assert_eq!(learning_rate(&c, 10), 0.05);
        assert_eq!(learning_rate(&c, 25), 0.025);
    }
}
