//! `WdfDriverCreate`: the framework driver object behind `DriverEntry`.

use core::ptr::null_mut;

use wdk_sys::{
    NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT, WDF_DRIVER_CONFIG, WDF_NO_OBJECT_ATTRIBUTES,
    WDFDRIVER, call_unsafe_wdf_function_binding,
};

/// Creates the framework driver object with `config` (PASSIVE_LEVEL, `DriverEntry`).
///
/// # Errors
/// The framework's status; `DriverEntry` returns it.
///
/// # Safety
/// `driver` and `registry_path` are the ones the system passed to `DriverEntry`, and this is
/// the only call.
pub unsafe fn create(
    driver: PDRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
    config: &mut WDF_DRIVER_CONFIG,
) -> Result<WDFDRIVER, NTSTATUS> {
    let mut wdf_driver: WDFDRIVER = null_mut();
    // SAFETY: the caller's promise; `config` is an initialised configuration (copied) and
    // `wdf_driver` a local that receives the handle.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverCreate,
            driver,
            registry_path,
            WDF_NO_OBJECT_ATTRIBUTES,
            config,
            &mut wdf_driver,
        )
    };
    if wdk::nt_success(status) {
        Ok(wdf_driver)
    } else {
        Err(status)
    }
}
