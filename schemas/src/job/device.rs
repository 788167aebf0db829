//! Where a model's layers compute, for `[train]` and `[infer]` alike.

use serde::{Deserialize, Serialize};

/// The device when a job names none.
pub const DEFAULT_DEVICE: DeviceKind = DeviceKind::Cpu;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// burn's Flex backend, with the edge-partitioned aggregation kernel.
    Cpu,
    /// The default wgpu adapter (Vulkan, Metal or DX12; software Vulkan works): needs a build
    /// with the `gpu` cargo feature.
    Gpu,
}

/// Which implementation aggregates neighbors (see `gnn::kernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggregation {
    /// The edge-partitioned kernel where the device supports it (the CPU), the reference
    /// elsewhere.
    #[default]
    Auto,
    /// Gather/scatter over burn tensor ops: slower on the CPU, kept as the reference.
    Reference,
}
