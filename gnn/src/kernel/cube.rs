//! The kernel on burn's cubecl backend (the GPU): one unit per output value walks its row's
//! edges in the plan's order and writes the sum once. No atomics: the result is the same from
//! run to run, and every unit works, where burn's `select_assign` gives one unit per column the
//! whole edge list to walk (a 256-wide layer of 100k edges ran on 256 units).
//!
//! The plan's arrays go to the device once per plan and stay with it ([`DevicePlan`]), so the
//! forward pass and its backward share one upload.

use std::any::Any;
use std::sync::Arc;

use burn::backend::Cube;
use burn::backend::TensorMetadata;
use burn::tensor::{DType, TensorData};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeDevice};
use cubecl::prelude::*;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

use super::EdgeOps;
use super::plan::{Csr, PlanRef};

/// `out[row, c] = sum over the row's positions p of coef[edge[p], c / width] * x[other[p], c]`.
#[cube(launch_unchecked)]
fn aggregate_kernel(
    x: &Tensor<f32>,
    coef: &Tensor<f32>,
    ptr: &Tensor<u32>,
    edge: &Tensor<u32>,
    other: &Tensor<u32>,
    out: &mut Tensor<f32>,
    cols: usize,
    heads: usize,
    width: usize,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let row = ABSOLUTE_POS / cols;
    let c = ABSOLUTE_POS % cols;
    let h = c / width;
    let start = usize::cast_from(ptr[row]);
    let end = usize::cast_from(ptr[row + 1]);
    let mut acc = f32::new(0.0);
    for p in start..end {
        let e = usize::cast_from(edge[p]);
        let r = usize::cast_from(other[p]);
        acc += coef[e * heads + h] * x[r * cols + c];
    }
    out[ABSOLUTE_POS] = acc;
}

/// `grad[e, h] = sum over head h's columns c of g[write[e], c] * x[read[e], c]`.
#[cube(launch_unchecked)]
fn coef_grad_kernel(
    g: &Tensor<f32>,
    x: &Tensor<f32>,
    write: &Tensor<u32>,
    read: &Tensor<u32>,
    grad: &mut Tensor<f32>,
    cols: usize,
    heads: usize,
    width: usize,
) {
    if ABSOLUTE_POS >= grad.len() {
        terminate!();
    }
    let e = ABSOLUTE_POS / heads;
    let h = ABSOLUTE_POS % heads;
    let w = usize::cast_from(write[e]) * cols + h * width;
    let r = usize::cast_from(read[e]) * cols + h * width;
    let mut acc = f32::new(0.0);
    for j in 0..width {
        acc += g[w + j] * x[r + j];
    }
    grad[ABSOLUTE_POS] = acc;
}

/// One CSR on the device.
struct DeviceCsr {
    ptr: CubeTensor,
    edge: CubeTensor,
    other: CubeTensor,
}

/// A plan's arrays on one device: both CSRs, and each edge's destination and source.
pub struct DevicePlan {
    device: CubeDevice,
    by_dst: DeviceCsr,
    by_src: DeviceCsr,
    dst: CubeTensor,
    src: CubeTensor,
}

fn upload(values: Vec<u32>, device: &CubeDevice) -> CubeTensor {
    let n = values.len();
    <CubeBackend as burn::backend::ops::IntTensorOps<CubeBackend>>::int_from_data(TensorData::new(values, [n]), device)
}

fn device_csr(csr: &Csr, device: &CubeDevice) -> DeviceCsr {
    DeviceCsr {
        ptr: upload(csr.ptr.iter().map(|&p| p as u32).collect(), device),
        edge: upload(csr.edge.clone(), device),
        other: upload(csr.other.clone(), device),
    }
}

impl DevicePlan {
    fn new(plan: &super::plan::EdgePlan, device: &CubeDevice) -> DevicePlan {
        // Each edge's destination (the row that holds it in `by_dst`) and source.
        let (mut dst, mut src) = (vec![0u32; plan.edges()], vec![0u32; plan.edges()]);
        let by_dst = &plan.by_dst;
        for row in 0..by_dst.rows() {
            for p in by_dst.ptr[row]..by_dst.ptr[row + 1] {
                dst[by_dst.edge[p] as usize] = row as u32;
                src[by_dst.edge[p] as usize] = by_dst.other[p];
            }
        }
        DevicePlan {
            device: device.clone(),
            by_dst: device_csr(&plan.by_dst, device),
            by_src: device_csr(&plan.by_src, device),
            dst: upload(dst, device),
            src: upload(src, device),
        }
    }
}

/// The plan's arrays on `device`, uploaded on first use.
fn on_device(plan: &PlanRef, device: &CubeDevice) -> Arc<DevicePlan> {
    let cached = plan.device.get_or_init(|| Arc::new(DevicePlan::new(plan, device)) as Arc<dyn Any + Send + Sync>);
    match cached.downcast_ref::<DevicePlan>() {
        Some(p) if p.device == *device => {
            // The cache holds `Arc<dyn Any>`; hand out a typed handle to the same plan.
            let any = cached.clone();
            any.downcast::<DevicePlan>().expect("checked above")
        }
        _ => Arc::new(DevicePlan::new(plan, device)),
    }
}

fn dims2(t: &CubeTensor) -> [usize; 2] {
    let shape = t.shape();
    assert_eq!(shape.num_dims(), 2, "the edge kernel takes 2-d tensors");
    assert_eq!(t.dtype, DType::F32, "the edge kernel runs on f32 tensors");
    [shape[0], shape[1]]
}

fn launch_size(t: &CubeTensor, units: usize) -> (CubeCount, CubeDim) {
    let cube_dim = CubeDim::new(&t.client, units);
    (calculate_cube_count_elemwise(&t.client, units, cube_dim), cube_dim)
}

impl EdgeOps for Cube {
    fn edge_aggregate(x: CubeTensor, coef: CubeTensor, plan: PlanRef, transpose: bool) -> CubeTensor {
        let (x, coef) = (into_contiguous(x), into_contiguous(coef));
        let ([read_rows, cols], [edges, heads]) = (dims2(&x), dims2(&coef));
        let expect_read = if transpose { plan.rows_out } else { plan.rows_in };
        assert!(read_rows >= expect_read && edges == plan.edges(), "edge kernel: shapes do not match the plan");
        let rows = plan.csr(transpose).rows();
        let out = empty_device_dtype(x.client.clone(), x.device.clone(), [rows, cols].into(), DType::F32);
        let units = rows * cols;
        if units == 0 {
            return out;
        }
        let on = on_device(&plan, &x.device);
        let csr = if transpose { &on.by_src } else { &on.by_dst };
        let (count, dim) = launch_size(&out, units);
        unsafe {
            aggregate_kernel::launch_unchecked(
                &out.client,
                count,
                dim,
                x.into_tensor_arg(),
                coef.into_tensor_arg(),
                csr.ptr.clone().into_tensor_arg(),
                csr.edge.clone().into_tensor_arg(),
                csr.other.clone().into_tensor_arg(),
                out.clone().into_tensor_arg(),
                cols,
                heads,
                cols / heads,
            )
        };
        out
    }

    fn edge_coef_grad(g: CubeTensor, x: CubeTensor, plan: PlanRef, transpose: bool, heads: usize) -> CubeTensor {
        let (g, x) = (into_contiguous(g), into_contiguous(x));
        let [_, cols] = dims2(&x);
        let edges = plan.edges();
        let grad = empty_device_dtype(x.client.clone(), x.device.clone(), [edges, heads].into(), DType::F32);
        if edges * heads == 0 {
            return grad;
        }
        let on = on_device(&plan, &x.device);
        // The forward wrote destinations (sources when transposed) and read the other end.
        let (write, read) = if transpose { (&on.src, &on.dst) } else { (&on.dst, &on.src) };
        let (count, dim) = launch_size(&grad, edges * heads);
        unsafe {
            coef_grad_kernel::launch_unchecked(
                &grad.client,
                count,
                dim,
                g.into_tensor_arg(),
                x.into_tensor_arg(),
                write.clone().into_tensor_arg(),
                read.clone().into_tensor_arg(),
                grad.clone().into_tensor_arg(),
                cols,
                heads,
                cols / heads,
            )
        };
        grad
    }
}
