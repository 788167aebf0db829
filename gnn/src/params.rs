//! A model's parameters as one flat `f32` vector, in the module's visiting order: what the
//! parameter server shards, what workers pull and push, what checkpoints hold.

use burn::module::{ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::TensorData;

use crate::model::Gnn;

struct Flatten(Vec<f32>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.extend(param.val().into_data().try_to_vec::<f32>().expect("parameters are f32"));
    }
}

/// Every parameter, flattened.
pub fn flatten(model: &Gnn) -> Vec<f32> {
    let mut f = Flatten(Vec::new());
    model.visit(&mut f);
    f.0
}

struct Gradients<'a> {
    grads: &'a burn::tensor::Gradients,
    out: Vec<f32>,
}

impl ModuleVisitor for Gradients<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        match value.grad(self.grads) {
            Some(g) => self.out.extend(g.into_data().try_to_vec::<f32>().expect("gradients are f32")),
            None => self.out.extend(std::iter::repeat_n(0.0, value.shape().num_elements())),
        }
    }
}

/// The gradient of every parameter, flattened like [`flatten`] (zero where a parameter took no
/// part).
pub fn gradients(model: &Gnn, grads: &burn::tensor::Gradients) -> Vec<f32> {
    let mut g = Gradients { grads, out: Vec::new() };
    model.visit(&mut g);
    g.out
}

struct GradientTensors<'a> {
    grads: &'a burn::tensor::Gradients,
    out: Vec<Tensor<1>>,
}

impl ModuleVisitor for GradientTensors<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let n = value.shape().num_elements();
        let device = value.clone().inner().device();
        self.out.push(match value.grad(self.grads) {
            Some(g) => g.reshape([n]),
            None => Tensor::zeros([n], &device),
        });
    }
}

/// [`gradients`] as tensors on the device, one per parameter in the same order: concatenated
/// with whatever else a step reads, they come back in one transfer.
pub fn gradient_tensors(model: &Gnn, grads: &burn::tensor::Gradients) -> Vec<Tensor<1>> {
    let mut g = GradientTensors { grads, out: Vec::new() };
    model.visit(&mut g);
    g.out
}

struct Load<'a> {
    values: &'a [f32],
    at: usize,
    device: Device,
}

impl ModuleMapper for Load<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let shape = param.val().shape();
        let n = shape.num_elements();
        let values = self.values[self.at..self.at + n].to_vec();
        self.at += n;
        let tensor = Tensor::<D>::from_data(TensorData::new(values, shape), &self.device);
        let tensor = if self.device.is_autodiff() { tensor.require_grad() } else { tensor };
        Param::initialized(param.id, tensor)
    }
}

/// Loads `values` (laid out as by [`flatten`]) into the model, as leaves that track gradients
/// when `device` is an autodiff device.
pub fn load(model: Gnn, values: &[f32], device: &Device) -> Gnn {
    let mut l = Load { values, at: 0, device: device.clone() };
    let model = model.map(&mut l);
    assert_eq!(l.at, values.len(), "parameter vector length does not match the model");
    model
}
