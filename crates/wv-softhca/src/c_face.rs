//! The soft HCA's C face: the device as the `RDMA_INTERFACE_VERBS` table a Windows soft-HCA
//! driver would hand the WinVerbs filter through `IRP_MN_QUERY_INTERFACE`. Built by
//! `wv-ci`'s export adapter, so the table is exactly what an OFW HCA driver exposes: the same
//! functions, handles, `ci_umv_buf_t` vendor bytes, `query_ca` layout and event callbacks.

use alloc::sync::Arc;

use wv_ci::CiExport;
use wv_hal::{DeviceModelPlatform, VerbsError};

use crate::SoftHca;

impl<P: DeviceModelPlatform> SoftHca<P> {
    /// The device's verbs table. Each [`CiExport::interface`] call is one answered query,
    /// holding one reference on the device until its `InterfaceDereference`.
    ///
    /// # Errors
    /// The device's own open (for event delivery) failed, for instance after removal.
    pub fn c_interface(self: &Arc<Self>) -> Result<CiExport<Self>, VerbsError> {
        CiExport::new(Arc::clone(self))
    }
}
