//! The soft HCA's C face: the device as the `RDMA_INTERFACE_VERBS` table a Windows soft-HCA
//! driver would hand the WinVerbs filter through `IRP_MN_QUERY_INTERFACE`, and its connection
//! manager as the `INFINIBAND_INTERFACE_CM` table ibbus answers on the same stack. Both are
//! built by `wv-ci`'s export adapters, so the tables are exactly what OFW exposes: the same
//! functions, handles, `ci_umv_buf_t` vendor bytes, `query_ca` layout, CM ids and callbacks.

use alloc::sync::Arc;

use wv_ci::{CiCmExport, CiExport, ExportError};
use wv_hal::{DeviceModelPlatform, VerbsError};

use crate::{SoftCm, SoftHca};

impl<P: DeviceModelPlatform> SoftHca<P> {
    /// The device's verbs table. Each [`CiExport::interface`] call is one answered query,
    /// holding one reference on the device until its `InterfaceDereference`.
    ///
    /// # Errors
    /// The device's own open (for event delivery) failed, for instance after removal.
    pub fn c_interface(self: &Arc<Self>) -> Result<CiExport<Self>, VerbsError> {
        CiExport::new(Arc::clone(self))
    }

    /// The device's CM table (`create_id` … `get_qp_attr` over this device's [`SoftCm`]).
    ///
    /// # Errors
    /// No export slot is free (the C table's `create_id` has no context, so each export takes
    /// one of a fixed number of process-wide slots), or no memory.
    #[allow(
        clippy::disallowed_methods,
        reason = "once per interface query at device arrival; the export takes a std Arc"
    )]
    pub fn c_cm_interface(&self) -> Result<CiCmExport<SoftCm>, ExportError> {
        CiCmExport::new(Arc::new(self.cm()))
    }
}
