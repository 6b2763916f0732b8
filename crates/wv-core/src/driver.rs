//! The driver object: lower devices, open files, and the [`FilterDriver`] entry points.

use alloc::vec::Vec;

use wv_abi::NtStatus;
use wv_hal::{Event, FilterDriver, KArc, KWeak, Platform, SpinLock, Verbs};

use crate::DriverConfig;
use crate::device;
use crate::dispatch;
use crate::fallible::push_locked;
use crate::hand_off::Estimate;
use crate::provider::{FileContext, Provider};
use crate::rdma_device::RdmaDevice;
#[cfg(feature = "fault-injection")]
use crate::shared::RawCompleter;
use crate::shared::Shared;

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
            hand_off: Estimate::new(),
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
        let dev = RdmaDevice::try_new(&shared.platform, lower, cm)?;
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
            // Nothing uses the interface any more: drop our references on the lower device.
            rdma.release();
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
