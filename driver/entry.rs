//! `DriverEntry`, `EvtDriverUnload` and the driver-wide state every callback reaches: the
//! driver core and the control device's lifetime rules, in nonpaged pool from `DriverEntry`
//! until unload.

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

use wdk::paged_code;
use wdk_sys::{
    DRIVER_OBJECT, NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_SUCCESS, WDFDRIVER,
};
use wv_ci::CiVerbs;
use wv_core::control::ControlDevice;
use wv_core::{Driver, DriverConfig};

use crate::filter;
use crate::platform::WdfPlatform;
use crate::wdf::driver;
use crate::wdf::pool::PoolBox;
use crate::wdf::sync::WaitLock;
use crate::wdf::wdf_init::wdf_driver_config_init;

/// The driver core over the controllers' C verbs tables.
pub type Core = Driver<WdfPlatform, CiVerbs>;

/// State shared by every callback.
pub struct Globals {
    /// The WinVerbs driver core.
    pub core: Core,
    /// When the control device must exist.
    pub control: ControlDevice<WdfPlatform>,
    /// Serialises the control device's creation and deletion with the decisions about them.
    pub lock: WaitLock,
}

static GLOBALS: AtomicPtr<Globals> = AtomicPtr::new(null_mut());

/// The driver-wide state; `None` only before `DriverEntry` finished or after unload, when no
/// callback can run.
pub fn globals() -> Option<&'static Globals> {
    // SAFETY: set once in DriverEntry to a pool allocation that lives until EvtDriverUnload,
    // after every device (and so every callback) is gone; only shared references are made.
    unsafe { GLOBALS.load(Ordering::Acquire).as_ref() }
}

/// The entry point WDF's `FxDriverEntry` stub calls (PASSIVE_LEVEL).
///
/// # Safety
/// Called once by the system with a valid driver object and registry path.
#[unsafe(export_name = "DriverEntry")]
pub unsafe extern "system" fn driver_entry(
    driver: &mut DRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
) -> NTSTATUS {
    let driver_object: PDRIVER_OBJECT = driver;
    let mut config = wdf_driver_config_init(Some(filter::evt_driver_device_add));
    // Never DriverObject->DriverUnload: KMDF owns it for PnP drivers.
    config.EvtDriverUnload = Some(evt_driver_unload);
    // SAFETY: the system's driver object and registry path, in the one DriverEntry call.
    // First, because the lock below is a framework object parented to the driver object. No
    // AddDevice can run before DriverEntry returns, so the globals are in place in time. The
    // framework driver object reaches every callback that needs it (AddDevice creates the
    // control device from its argument); nothing keeps it here.
    if let Err(status) = unsafe { driver::create(driver_object, registry_path, &mut config) } {
        return status;
    }
    // From here a failure returns its status and the framework deletes the driver object with
    // what was parented to it (the lock); EvtDriverUnload is not called.
    let lock = match WaitLock::new() {
        Ok(lock) => lock,
        Err(status) => return status,
    };
    let core = match Driver::try_new(WdfPlatform, DriverConfig::default()) {
        Ok(core) => core,
        Err(status) => return status.0 as NTSTATUS,
    };
    let state = Globals {
        core,
        control: ControlDevice::new(&WdfPlatform),
        lock,
    };
    let Ok(state) = PoolBox::try_new(state) else {
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    GLOBALS.store(state.into_raw(), Ordering::Release);
    STATUS_SUCCESS
}

/// Frees the driver-wide state.
fn free_globals() {
    let globals = GLOBALS.swap(null_mut(), Ordering::AcqRel);
    // SAFETY: the allocation DriverEntry gave away, taken back once (the swap cleared it).
    drop(unsafe { PoolBox::from_raw(globals) });
}

/// `EvtDriverUnload` (PASSIVE_LEVEL): every filter device is gone, and with the last one and the
/// last handle the control device; nothing uses the core any more.
extern "C" fn evt_driver_unload(_driver: WDFDRIVER) {
    paged_code!();
    free_globals();
}
