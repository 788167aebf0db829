//! The device a job computes on (without autodiff): burn's Flex backend on the CPU, or the
//! default wgpu adapter in builds with the `gpu` feature.

use burn::prelude::*;
use schemas::job::DeviceKind;

use crate::Error;

/// The device for `kind`. The GPU is probed with a small computation so that a machine without
/// a usable adapter gets an error, not a panic mid-run.
pub fn device(kind: DeviceKind) -> Result<Device, Error> {
    match kind {
        DeviceKind::Cpu => Ok(Device::flex()),
        #[cfg(feature = "gpu")]
        DeviceKind::Gpu => {
            let probe = std::panic::catch_unwind(|| {
                let device = Device::wgpu(burn::tensor::DeviceKind::DefaultDevice);
                let sum = Tensor::<1>::from_floats([1.0, 2.0], &device).sum().into_scalar::<f32>();
                (sum == 3.0).then_some(device)
            });
            match probe {
                Ok(Some(device)) => Ok(device),
                _ => Err(Error::Device(
                    "device = \"gpu\": no usable wgpu adapter (install a Vulkan driver; \
                     Debian's mesa-vulkan-drivers runs it in software)"
                        .into(),
                )),
            }
        }
        #[cfg(not(feature = "gpu"))]
        DeviceKind::Gpu => Err(Error::Device(
            "device = \"gpu\" needs a build with the `gpu` feature: cargo build --release --features gpu".into(),
        )),
    }
}
