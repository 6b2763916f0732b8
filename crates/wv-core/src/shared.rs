//! What the driver, its files and its work items share: the platform, the settings, the lower
//! devices present and the open files.

#[cfg(feature = "fault-injection")]
use alloc::boxed::Box;
use alloc::vec::Vec;

#[cfg(feature = "fault-injection")]
use wv_abi::NtStatus;
use wv_hal::{KArc, KWeak, Platform, SpinLock, Verbs};

use crate::DriverConfig;
use crate::hand_off::Estimate;
use crate::provider::Provider;
use crate::rdma_device::RdmaDevice;
use crate::sync::ModifySched;

/// State shared by the driver, its files and its work items.
pub(crate) struct Shared<P: Platform, V: Verbs> {
    pub platform: P,
    pub config: DriverConfig,
    /// Lower devices present now (OFW `DevList`).
    pub devices: P::SpinLock<Vec<KArc<RdmaDevice<P, V>>>>,
    /// Open files (OFW `ProvList`), so that removal can reach their objects.
    pub providers: P::SpinLock<Vec<KWeak<Provider<P, V>>>>,
    /// How long a work item the driver queues waits before a worker starts it (every QP
    /// drainer and endpoint work item is timed).
    pub hand_off: Estimate,
    /// The deliberate bugs of a fault-injection build.
    #[cfg(feature = "fault-injection")]
    pub faults: P::SpinLock<crate::Faults>,
    /// Turns a request into a raw IRP completer (see `Driver::set_raw_completer`).
    #[cfg(feature = "fault-injection")]
    pub raw_completer: P::SpinLock<Option<RawCompleter<P>>>,
}

/// Turns a request into a completion function that can be called more than once: the typed
/// request API cannot complete twice, so the "complete twice" fault needs the platform's raw
/// IRP layer (in `wv-host`, `HostRequest::into_raw_irp`).
#[cfg(feature = "fault-injection")]
pub type RawCompleter<P> = fn(<P as Platform>::Request) -> Box<dyn Fn(NtStatus, usize) + Send>;

impl<P: Platform, V: Verbs> Shared<P, V> {
    /// A drainer of `sched` starts: how long it waited for a worker goes into
    /// [`Shared::hand_off`].
    pub fn timed_start(&self, sched: &ModifySched<P>) {
        if let Some(waited) = sched.started(self.platform.now_ns()) {
            self.hand_off.record(waited);
        }
    }

    /// The device with node GUID `guid`, with a share of its open gate taken (so removal
    /// waits for the caller's DEVICE_OPEN to finish), or `None`.
    pub fn enter_device(&self, guid: u64) -> Option<KArc<RdmaDevice<P, V>>> {
        let devices = self.devices.lock();
        let dev = devices.iter().find(|d| d.guid == guid)?;
        // Entered under the list lock: removal unlinks the device before closing the gate.
        dev.gate.enter().then(|| KArc::clone(dev))
    }

    /// The deliberate bugs in force (fault-injection builds only).
    #[cfg(feature = "fault-injection")]
    pub fn faults(&self) -> crate::Faults {
        *self.faults.lock()
    }
}
