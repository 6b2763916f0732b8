//! The driver object: lower devices, open files, and the [`FilterDriver`] entry points.

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use wv_abi::NtStatus;
use wv_hal::{FilterDriver, Platform, SpinLock, Verbs};

use crate::DriverConfig;
use crate::device::{self, DeviceObj};
use crate::dispatch;
use crate::provider::{FileContext, Provider};
use crate::sync::Gate;

/// A lower RDMA device that arrived (OFW `WV_RDMA_DEVICE`).
pub(crate) struct RdmaDevice<P: Platform, V: Verbs> {
    /// Node GUID, NET64 as stored.
    pub guid: u64,
    /// The verbs interface; dropped when removal has finished with it.
    lower: P::SpinLock<Option<Arc<V>>>,
    /// The connection manager of the device's stack, if it has one; dropped with `lower`.
    cm: P::SpinLock<Option<Arc<V::Cm>>>,
    /// DEVICE_OPENs in progress on this device; removal closes it and waits for them.
    pub gate: Gate<P>,
    /// Every opened device (`WV_DEVICE`) on it, of every file, until its teardown is over.
    pub opens: P::SpinLock<Vec<Weak<DeviceObj<P, V>>>>,
}

impl<P: Platform, V: Verbs> RdmaDevice<P, V> {
    /// The verbs interface, unless removal has dropped it.
    pub fn lower(&self) -> Option<Arc<V>> {
        self.lower.lock().clone()
    }

    /// The connection manager, unless the device has none or removal has dropped it.
    #[allow(dead_code)]
    pub fn cm(&self) -> Option<Arc<V::Cm>> {
        self.cm.lock().clone()
    }
}

/// State shared by the driver, its files and its work items.
pub(crate) struct Shared<P: Platform, V: Verbs> {
    pub platform: P,
    pub config: DriverConfig,
    /// Lower devices present now (OFW `DevList`).
    pub devices: P::SpinLock<Vec<Arc<RdmaDevice<P, V>>>>,
    /// Open files (OFW `ProvList`), so that removal can reach their objects.
    pub providers: P::SpinLock<Vec<Weak<Provider<P, V>>>>,
    /// Debug fault support: turns a request into a raw IRP completer (see
    /// [`Driver::set_raw_completer`]).
    pub raw_completer: P::SpinLock<Option<RawCompleter<P>>>,
}

/// Turns a request into a completion function that can be called more than once: the typed
/// request API cannot complete twice, so the "complete twice" fault needs the platform's raw
/// IRP layer (in `wv-host`, `HostRequest::into_raw_irp`).
#[doc(hidden)]
pub type RawCompleter<P> = fn(<P as Platform>::Request) -> Box<dyn Fn(NtStatus, usize) + Send>;

impl<P: Platform, V: Verbs> Shared<P, V> {
    /// The device with node GUID `guid`, with a share of its open gate taken (so removal
    /// waits for the caller's DEVICE_OPEN to finish), or `None`.
    pub fn enter_device(&self, guid: u64) -> Option<Arc<RdmaDevice<P, V>>> {
        let devices = self.devices.lock();
        let dev = devices.iter().find(|d| d.guid == guid)?;
        // Entered under the list lock: removal unlinks the device before closing the gate.
        dev.gate.enter().then(|| Arc::clone(dev))
    }
}

/// The WinVerbs filter driver core.
///
/// One instance serves the control device and every lower device below the filter. The
/// platform calls it through [`FilterDriver`]; everything else is internal.
pub struct Driver<P: Platform, V: Verbs> {
    shared: Arc<Shared<P, V>>,
}

impl<P: Platform, V: Verbs> Driver<P, V> {
    /// A driver with no lower device yet. `platform` provides every OS service the core uses.
    pub fn new(platform: P, config: DriverConfig) -> Self {
        let devices = platform.spin_lock(Vec::new());
        let providers = platform.spin_lock(Vec::new());
        let raw_completer = platform.spin_lock(None);
        Driver {
            shared: Arc::new(Shared {
                platform,
                config,
                devices,
                providers,
                raw_completer,
            }),
        }
    }

    /// Installs the raw completer the `complete_twice` debug fault uses. Tests only.
    #[doc(hidden)]
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

    fn device_arrival(&self, lower: Arc<V>, cm: Option<Arc<V::Cm>>) -> Result<(), NtStatus> {
        let shared = &self.shared;
        let gate = Gate::new(&shared.platform)?;
        let dev = Arc::new(RdmaDevice {
            guid: lower.guid(),
            lower: shared.platform.spin_lock(Some(lower)),
            cm: shared.platform.spin_lock(cm),
            gate,
            opens: shared.platform.spin_lock(Vec::new()),
        });
        shared.devices.lock().push(dev);
        Ok(())
    }

    fn device_removal(&self, guid: u64) {
        let shared = &self.shared;
        let removed: Vec<_> = {
            let mut devices = shared.devices.lock();
            let (gone, kept): (Vec<_>, Vec<_>) = core::mem::take(&mut *devices)
                .into_iter()
                .partition(|d| d.guid == guid);
            *devices = kept;
            gone
        };
        for rdma in removed {
            // No new DEVICE_OPEN can find it; wait for those already opening it.
            rdma.gate.close();
            rdma.gate.wait_drained();
            let opens: Vec<_> = rdma.opens.lock().iter().filter_map(Weak::upgrade).collect();
            for dev in opens {
                device::remove(&dev, shared);
            }
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
        let provider = Arc::new(Provider::new(Arc::clone(&self.shared))?);
        let mut providers = self.shared.providers.lock();
        providers.retain(|p| p.strong_count() > 0);
        providers.push(Arc::downgrade(&provider));
        Ok(FileContext { provider })
    }

    fn file_cleanup(&self, file: &FileContext<P, V>) {
        file.provider.cleanup();
    }

    fn file_close(&self, file: FileContext<P, V>) {
        // CLOSE without CLEANUP does not happen on Windows; make it harmless anyway.
        file.provider.cleanup();
        let gone = Arc::as_ptr(&file.provider);
        self.shared
            .providers
            .lock()
            .retain(|p| p.as_ptr() != gone && p.strong_count() > 0);
    }

    fn device_io_control(&self, file: &FileContext<P, V>, request: P::Request) {
        dispatch::device_io_control(&file.provider, request);
    }
}
