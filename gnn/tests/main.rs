//! The model tests, one module a file, in one test binary so that burn is linked once: the
//! kernel against a gather/scatter reference, the models against dense-matrix formulas, losses,
//! typed and link models, and the GPU against the CPU in builds with the `gpu` feature.

mod common;

mod gpu;
mod hetero;
mod kernel;
mod link;
mod loss;
mod reference;
