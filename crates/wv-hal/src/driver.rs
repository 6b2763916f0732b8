//! What the platform calls: the driver's side of PnP and of the control device.

use crate::{KArc, Platform, Verbs};
use wv_abi::NtStatus;

/// The driver as the platform sees it. `wv-core` implements it; the WDF glue and the host model
/// call it.
///
/// # IRQL
/// Every method is called at PASSIVE_LEVEL, in the context the comment names.
pub trait FilterDriver<P: Platform>: Send + Sync + 'static {
    /// The lower controller's verbs interface.
    type Lower: Verbs;
    /// Per-file state (the WinVerbs "provider"), kept in the file object's context.
    type File: Send + Sync + 'static;

    /// A lower device has started and handed over its verbs interface and, if its stack has
    /// one, its connection manager (without one the endpoint IOCTLs cannot connect through
    /// this device), each in a `KArc` the caller allocated (fallibly: when it cannot, the
    /// filter passes the device through).
    ///
    /// WDF: `EvtDeviceSelfManagedIoInit` (first start) or `EvtDeviceSelfManagedIoRestart`
    /// (every return to D0) of the filter device, after `WdfFdoQueryForInterface`
    /// (`GUID_RDMA_INTERFACE_VERBS`, then `GUID_INFINIBAND_INTERFACE_CM`) succeeded; the glue
    /// calls it through `wv_core::filter::Controller`.
    ///
    /// # Errors
    /// The status to fail the start with.
    fn device_arrival(
        &self,
        lower: KArc<Self::Lower>,
        cm: Option<KArc<<Self::Lower as Verbs>::Cm>>,
    ) -> Result<(), NtStatus>;

    /// The lower device with node GUID `guid` is going away (a power-down, a stop, an orderly
    /// or surprise removal). On return nothing uses its verbs interface any more: every parked
    /// request on it has ended and every handle on it is invalid.
    ///
    /// WDF: `EvtDeviceSelfManagedIoSuspend` (before every power-down and at removal), or
    /// `EvtDeviceSurpriseRemoval` / `EvtDeviceSelfManagedIoCleanup` of the filter device if the
    /// suspend did not run, through `wv_core::filter::Controller`.
    fn device_removal(&self, guid: u64);

    /// A handle to `\\.\WinVerbs` was opened.
    ///
    /// WDF: `EvtDeviceFileCreate` of the control device (caller's context).
    ///
    /// # Errors
    /// The status CreateFile fails with.
    fn file_create(&self) -> Result<Self::File, NtStatus>;

    /// The last handle to the file was closed (`IRP_MJ_CLEANUP`): every object of the file is
    /// destroyed and every request it has parked ends. IOCTLs still arriving for the file
    /// (through duplicated handles in flight) get `STATUS_FILE_CLOSED`.
    ///
    /// WDF: `EvtFileCleanup`.
    fn file_cleanup(&self, file: &Self::File);

    /// The file object is going away (`IRP_MJ_CLOSE`): every request on it has completed.
    ///
    /// WDF: `EvtFileClose`.
    fn file_close(&self, file: Self::File);

    /// An IOCTL on the file. The driver completes `request` inline or keeps it (parked or on a
    /// work item) and completes it later.
    ///
    /// WDF: `EvtIoDeviceControl` of the control device's parallel default queue, which runs in
    /// the caller's thread (the I/O manager's dispatch of a non-power-managed control device);
    /// see spec §7.1-l for why the glue also registers `EvtIoInCallerContext`.
    fn device_io_control(&self, file: &Self::File, request: P::Request);
}
