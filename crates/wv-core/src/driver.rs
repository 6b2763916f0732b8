//! The driver object: lower devices, open files, and the [`FilterDriver`] entry points.

#[cfg(feature = "fault-injection")]
use alloc::boxed::Box;
use alloc::vec::Vec;

use wv_abi::NtStatus;
use wv_hal::{Event, FilterDriver, KArc, KWeak, Platform, SpinLock, Verbs};

use crate::DriverConfig;
use crate::device::{self, DeviceObj};
use crate::dispatch;
use crate::fallible::push_locked;
use crate::provider::{FileContext, Provider};
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
}

impl<P: Platform, V: Verbs> RdmaDevice<P, V> {
    /// The verbs interface, unless removal has dropped it.
    pub fn lower(&self) -> Option<KArc<V>> {
        self.lower.lock().clone()
    }

    /// The connection manager, unless the device has none or removal has dropped it.
    pub fn cm(&self) -> Option<KArc<V::Cm>> {
        self.cm.lock().clone()
    }
}

/// State shared by the driver, its files and its work items.
pub(crate) struct Shared<P: Platform, V: Verbs> {
    pub platform: P,
    pub config: DriverConfig,
    /// Lower devices present now (OFW `DevList`).
    pub devices: P::SpinLock<Vec<KArc<RdmaDevice<P, V>>>>,
    /// Open files (OFW `ProvList`), so that removal can reach their objects.
    pub providers: P::SpinLock<Vec<KWeak<Provider<P, V>>>>,
    /// The deliberate bugs of a fault-injection build.
    #[cfg(feature = "fault-injection")]
    pub faults: P::SpinLock<crate::Faults>,
    /// Turns a request into a raw IRP completer (see [`Driver::set_raw_completer`]).
    #[cfg(feature = "fault-injection")]
    pub raw_completer: P::SpinLock<Option<RawCompleter<P>>>,
}

/// Turns a request into a completion function that can be called more than once: the typed
/// request API cannot complete twice, so the "complete twice" fault needs the platform's raw
/// IRP layer (in `wv-host`, `HostRequest::into_raw_irp`).
#[cfg(feature = "fault-injection")]
pub type RawCompleter<P> = fn(<P as Platform>::Request) -> Box<dyn Fn(NtStatus, usize) + Send>;

impl<P: Platform, V: Verbs> Shared<P, V> {
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

/// The WinVerbs filter driver core.
///
/// One instance serves the control device and every lower device below the filter. The
/// platform calls it through [`FilterDriver`]; everything else is internal.
pub struct Driver<P: Platform, V: Verbs> {
    shared: KArc<Shared<P, V>>,
}

impl<P: Platform, V: Verbs> Driver<P, V> {
    /// A driver with no lower device yet. `platform` provides every OS service the core uses.
    /// `DriverEntry` fails with the status when the driver's state cannot be allocated.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when out of memory.
    pub fn try_new(platform: P, config: DriverConfig) -> Result<Self, NtStatus> {
        let devices = platform.spin_lock(Vec::new());
        let providers = platform.spin_lock(Vec::new());
        #[cfg(feature = "fault-injection")]
        let (faults, raw_completer) = (
            platform.spin_lock(crate::Faults::default()),
            platform.spin_lock(None),
        );
        let shared = KArc::try_new(Shared {
            platform,
            config,
            devices,
            providers,
            #[cfg(feature = "fault-injection")]
            faults,
            #[cfg(feature = "fault-injection")]
            raw_completer,
        })
        .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
        Ok(Driver { shared })
    }

    /// [`Driver::try_new`] for hosts where running out of memory at load is not a case to
    /// handle (tests, the in-process stack).
    ///
    /// # Panics
    /// When the driver's state cannot be allocated.
    pub fn new(platform: P, config: DriverConfig) -> Self {
        Self::try_new(platform, config).expect("driver state allocation")
    }

    /// Switches deliberate bugs on or off (fault-injection builds only).
    #[cfg(feature = "fault-injection")]
    pub fn inject(&self, faults: crate::Faults) {
        *self.shared.faults.lock() = faults;
    }

    /// Installs the raw completer the `complete_twice` fault uses.
    #[cfg(feature = "fault-injection")]
    pub fn set_raw_completer(&self, completer: RawCompleter<P>) {
        *self.shared.raw_completer.lock() = Some(completer);
    }

    /// The platform the driver was built with.
    pub fn platform(&self) -> &P {
        &self.shared.platform
    }

    /// The settings the driver was built with.
    pub fn config(&self) -> &DriverConfig {
        &self.shared.config
    }
}

impl<P: Platform, V: Verbs> FilterDriver<P> for Driver<P, V> {
    type Lower = V;
    type File = FileContext<P, V>;

    fn device_arrival(&self, lower: KArc<V>, cm: Option<KArc<V::Cm>>) -> Result<(), NtStatus> {
        let shared = &self.shared;
        let gate = Gate::new(&shared.platform)?;
        let dev = KArc::try_new(RdmaDevice {
            guid: lower.guid(),
            lower: shared.platform.spin_lock(Some(lower)),
            cm: shared.platform.spin_lock(cm),
            gate,
            opens: shared.platform.spin_lock(Vec::new()),
        })?;
        push_locked(&shared.devices, dev).map_err(|(_, e)| NtStatus::from(e))
    }

    fn device_removal(&self, guid: u64) {
        let shared = &self.shared;
        // Unlinked one at a time (no list is built: removal must not fail for want of memory).
        loop {
            let rdma = {
                let mut devices = shared.devices.lock();
                match devices.iter().position(|d| d.guid == guid) {
                    Some(at) => devices.remove(at),
                    None => break,
                }
            };
            // No new DEVICE_OPEN can find it; wait for those already opening it.
            rdma.gate.close();
            rdma.gate.wait_drained();
            // One opened device at a time, the first not yet removed: teardowns running
            // meanwhile may shorten the list, so no position is kept across the lock.
            loop {
                let dev = {
                    let opens = rdma.opens.lock();
                    opens
                        .iter()
                        .filter_map(KWeak::upgrade)
                        .find(|dev| !dev.removed.is_set())
                };
                let Some(dev) = dev else { break };
                device::remove(&dev, shared);
            }
            // The endpoints whose CM ids this device's CM made end too.
            crate::ep::remove_device(&rdma, shared);
            // Nothing uses the interface any more: drop our reference on the lower device, after
            // the lock: releasing the interface (`InterfaceDereference` on Windows) may need
            // PASSIVE_LEVEL, and the lock holds DISPATCH_LEVEL.
            let lower = rdma.lower.lock().take();
            let cm = rdma.cm.lock().take();
            drop(lower);
            drop(cm);
        }
    }

    fn file_create(&self) -> Result<FileContext<P, V>, NtStatus> {
        let provider = KArc::try_new(Provider::new(KArc::clone(&self.shared))?)?;
        self.shared
            .providers
            .lock()
            .retain(|p| p.strong_count() > 0);
        push_locked(&self.shared.providers, KArc::downgrade(&provider))
            .map_err(|(_, e)| NtStatus::from(e))?;
        Ok(FileContext { provider })
    }

    fn file_cleanup(&self, file: &FileContext<P, V>) {
        file.provider.cleanup();
    }

    fn file_close(&self, file: FileContext<P, V>) {
        // CLOSE without CLEANUP does not happen on Windows; make it harmless anyway.
        file.provider.cleanup();
        let gone = KArc::as_ptr(&file.provider);
        self.shared
            .providers
            .lock()
            .retain(|p| p.as_ptr() != gone && p.strong_count() > 0);
    }

    fn device_io_control(&self, file: &FileContext<P, V>, request: P::Request) {
        dispatch::device_io_control(&file.provider, request);
    }
}
