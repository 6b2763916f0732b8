//! The two ways a `WDFDEVICE_INIT` becomes a device: [`FilterDeviceInit`], the structure the
//! framework passes to `EvtDriverDeviceAdd` for a filter device on a controller's stack, and
//! [`ControlDeviceInit`], one the driver allocates for its control device. Each setter is a
//! safe method; creating the device consumes the value. All of it runs at PASSIVE_LEVEL.
//!
//! Who frees the structure when `WdfDeviceCreate` fails differs: the framework frees a PnP
//! device's, the driver must free a control device's (`WdfDeviceInitFree`), which
//! `ControlDeviceInit` does when it is dropped unused.

use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    NTSTATUS, PFN_WDF_IO_IN_CALLER_CONTEXT, PWDFDEVICE_INIT, UNICODE_STRING, WDF_DEVICE_IO_TYPE,
    WDF_FILEOBJECT_CONFIG, WDF_OBJECT_ATTRIBUTES, WDF_PNPPOWER_EVENT_CALLBACKS, WDFDEVICE,
    WDFDRIVER, call_unsafe_wdf_function_binding,
};

use super::device::Device;

/// `WdfDeviceCreate`. On success the framework owns `*init` (and nulls it).
///
/// # Safety
/// `*init` is a live init structure the caller holds.
unsafe fn device_create(
    init: &mut PWDFDEVICE_INIT,
    attributes: &mut WDF_OBJECT_ATTRIBUTES,
) -> Result<Device, NTSTATUS> {
    let mut device: WDFDEVICE = null_mut();
    // SAFETY: the caller's promise; `attributes` is initialised and copied; `device` receives
    // the handle.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, init, attributes, &mut device)
    };
    if nt_success(status) {
        // SAFETY: the device just created, live until the framework deletes it (a filter
        // device, at its removal) or this driver does (the control device).
        Ok(unsafe { Device::from_raw(device) })
    } else {
        Err(status)
    }
}

/// The init structure of a filter device, from `EvtDriverDeviceAdd`.
pub struct FilterDeviceInit(PWDFDEVICE_INIT);

impl FilterDeviceInit {
    /// Takes the structure the framework passed, and makes the device a filter: forwarded
    /// requests it has no queue for go down the stack (`WdfFdoInitSetFilter`, which must come
    /// first).
    ///
    /// # Safety
    /// `init` is the structure passed to the running `EvtDriverDeviceAdd`, not used elsewhere.
    pub unsafe fn new(init: PWDFDEVICE_INIT) -> FilterDeviceInit {
        // SAFETY: the caller's promise; the first call on the structure, as the DDI requires.
        unsafe { call_unsafe_wdf_function_binding!(WdfFdoInitSetFilter, init) };
        FilterDeviceInit(init)
    }

    /// `WdfDeviceInitSetPnpPowerEventCallbacks`; the framework copies them.
    pub fn set_pnp_power_callbacks(&mut self, callbacks: &mut WDF_PNPPOWER_EVENT_CALLBACKS) {
        // SAFETY: the structure is the driver's until the device is created.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDeviceInitSetPnpPowerEventCallbacks,
                self.0,
                callbacks
            )
        };
    }

    /// Creates the filter device. On failure the framework frees the structure (a PnP device).
    ///
    /// # Errors
    /// The framework's status.
    pub fn create(mut self, attributes: &mut WDF_OBJECT_ATTRIBUTES) -> Result<Device, NTSTATUS> {
        // SAFETY: the structure is the driver's until this call.
        unsafe { device_create(&mut self.0, attributes) }
    }
}

/// An init structure for the control device, freed on drop unless a device was created from it.
pub struct ControlDeviceInit(PWDFDEVICE_INIT);

impl ControlDeviceInit {
    /// `WdfControlDeviceInitAllocate` with the device's security descriptor; `None` when out of
    /// pool.
    pub fn allocate(driver: WDFDRIVER, sddl: &UNICODE_STRING) -> Option<ControlDeviceInit> {
        // SAFETY: `driver` is this driver's object (the framework passes it to the callback the
        // control device is created from, and it lives until unload); `sddl` outlives the call
        // and is copied.
        let init = unsafe {
            call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, sddl)
        };
        (!init.is_null()).then_some(ControlDeviceInit(init))
    }

    /// `WdfDeviceInitSetExclusive`.
    pub fn set_exclusive(&mut self, exclusive: bool) {
        // SAFETY: (this and each setter below) the structure is the driver's until the device
        // is created; PASSIVE_LEVEL.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfDeviceInitSetExclusive, self.0, exclusive.into())
        };
    }

    /// `WdfDeviceInitSetIoType`.
    pub fn set_io_type(&mut self, io_type: WDF_DEVICE_IO_TYPE) {
        // SAFETY: see `set_exclusive`.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitSetIoType, self.0, io_type) };
    }

    /// `WdfDeviceInitAssignName`; the framework copies the name.
    pub fn assign_name(&mut self, name: &UNICODE_STRING) -> NTSTATUS {
        // SAFETY: see `set_exclusive`; `name` outlives the call.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, self.0, name) }
    }

    /// `WdfDeviceInitSetFileObjectConfig`; both structures are copied.
    pub fn set_file_object_config(
        &mut self,
        config: &mut WDF_FILEOBJECT_CONFIG,
        attributes: &mut WDF_OBJECT_ATTRIBUTES,
    ) {
        // SAFETY: see `set_exclusive`.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDeviceInitSetFileObjectConfig,
                self.0,
                config,
                attributes,
            )
        };
    }

    /// `WdfDeviceInitSetIoInCallerContextCallback`.
    pub fn set_io_in_caller_context_callback(&mut self, callback: PFN_WDF_IO_IN_CALLER_CONTEXT) {
        // SAFETY: see `set_exclusive`.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDeviceInitSetIoInCallerContextCallback,
                self.0,
                callback,
            )
        };
    }

    /// Creates the control device. On failure the structure is freed when `self` drops.
    ///
    /// # Errors
    /// The framework's status.
    pub fn create(mut self, attributes: &mut WDF_OBJECT_ATTRIBUTES) -> Result<Device, NTSTATUS> {
        // SAFETY: the structure is the driver's until this call; on success the framework
        // nulled `self.0`, so the drop below frees nothing.
        unsafe { device_create(&mut self.0, attributes) }
    }
}

impl Drop for ControlDeviceInit {
    fn drop(&mut self) {
        if self.0.is_null() {
            return;
        }
        // SAFETY: a structure no device was created from: the driver frees it, once.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, self.0) };
    }
}
