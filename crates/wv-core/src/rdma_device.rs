//! A lower RDMA device that arrived below the filter (OFW `WV_RDMA_DEVICE`): its verbs
//! interface, its connection manager, and what removal needs to finish with it.

use alloc::vec::Vec;

use wv_abi::NtStatus;
use wv_hal::{KArc, KWeak, Platform, QpModify, SpinLock, Verbs, VerbsError};

use crate::device::DeviceObj;
use crate::hand_off::Estimate;
use crate::sync::Gate;

/// A lower RDMA device that arrived (OFW `WV_RDMA_DEVICE`).
pub(crate) struct RdmaDevice<P: Platform, V: Verbs> {
    /// Node GUID, NET64 as stored.
    pub guid: u64,
    /// The verbs interface; dropped when removal has finished with it. The platform allocated
    /// it (the glue's adapter over the interface it queried); the core only shares it.
    lower: P::SpinLock<Option<KArc<V>>>,
    /// The connection manager of the device's stack, if it has one; dropped with `lower`.
    cm: P::SpinLock<Option<KArc<V::Cm>>>,
    /// DEVICE_OPENs in progress on this device; removal closes it and waits for them.
    pub gate: Gate<P>,
    /// Every opened device (`WV_DEVICE`) on it, of every file, until its teardown is over.
    pub opens: P::SpinLock<Vec<KWeak<DeviceObj<P, V>>>>,
    /// How long one of its QP commands takes: every modify the driver makes is timed
    /// ([`RdmaDevice::modify_qp`]).
    pub commands: Estimate,
}

impl<P: Platform, V: Verbs> RdmaDevice<P, V> {
    /// The device `lower` (with its stack's connection manager `cm`) as it arrives.
    ///
    /// # Errors
    /// The status of the allocation that failed (the gate's event, `STATUS_NO_MEMORY` for the
    /// rest).
    pub fn try_new(
        platform: &P,
        lower: KArc<V>,
        cm: Option<KArc<V::Cm>>,
    ) -> Result<KArc<Self>, NtStatus> {
        let gate = Gate::new(platform)?;
        Ok(KArc::try_new(RdmaDevice {
            guid: lower.guid(),
            lower: platform.spin_lock(Some(lower)),
            cm: platform.spin_lock(cm),
            gate,
            opens: platform.spin_lock(Vec::new()),
            commands: Estimate::new(),
        })?)
    }

    /// `lower.modify_qp`, timed into [`RdmaDevice::commands`]. PASSIVE_LEVEL.
    pub fn modify_qp(
        &self,
        platform: &P,
        lower: &V,
        qp: &V::Qp,
        modify: &QpModify,
        out: &mut [u8],
    ) -> Result<(), VerbsError> {
        let start = platform.now_ns();
        let result = lower.modify_qp(qp, modify, out);
        self.commands
            .record(platform.now_ns().saturating_sub(start));
        result
    }

    /// The verbs interface, unless removal has dropped it.
    pub fn lower(&self) -> Option<KArc<V>> {
        self.lower.lock().clone()
    }

    /// The connection manager, unless the device has none or removal has dropped it.
    pub fn cm(&self) -> Option<KArc<V::Cm>> {
        self.cm.lock().clone()
    }

    /// The end of removal, once nothing uses the device any more: gives back the references on
    /// the verbs interface and the connection manager. Releasing an interface
    /// (`InterfaceDereference` on Windows) may need PASSIVE_LEVEL, so they are dropped after
    /// the locks (which hold DISPATCH_LEVEL).
    pub fn release(&self) {
        let lower = self.lower.lock().take();
        let cm = self.cm.lock().take();
        drop(lower);
        drop(cm);
    }
}
