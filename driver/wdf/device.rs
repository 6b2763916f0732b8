//! [`Device`]: a `WDFDEVICE` of this driver (a filter device, or the control device) and the
//! calls made on it after its creation. The one unsafe step is making the value: whoever does
//! promises the device is live for as long as the value is used; every method is then safe.

use core::mem::size_of;
use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    GUID, INTERFACE, NTSTATUS, PDEVICE_OBJECT, UNICODE_STRING, WDFDEVICE,
    call_unsafe_wdf_function_binding,
};
use wv_ci::{
    GUID_INFINIBAND_INTERFACE_CM, GUID_RDMA_INTERFACE_VERBS, INFINIBAND_INTERFACE_CM,
    INFINIBAND_INTERFACE_CM_VERSION, RDMA_INTERFACE_VERBS, RDMA_INTERFACE_VERBS_VERSION,
};

use super::object;
use super::request::OwnedRequest;

/// A live device of this driver.
#[derive(Clone, Copy, Debug)]
pub struct Device(WDFDEVICE);

/// A lower interface a filter asks its stack for with `IRP_MN_QUERY_INTERFACE`.
///
/// # Safety
/// The type is `#[repr(C)]`, begins with an `INTERFACE` header, and its all-zero value
/// ([`LowerInterface::zeroed`]) is valid; an answer the provider writes into it is one too.
pub unsafe trait LowerInterface: Sized {
    /// The interface's GUID.
    const GUID: wv_ci::GUID;
    /// The version asked for.
    const VERSION: u16;
    /// The empty structure the provider fills in.
    fn zeroed() -> Self;
}

// SAFETY: wv-ci's `RDMA_INTERFACE_VERBS` is `repr(C)`, starts with `InterfaceHeader:
// INTERFACE`, and is zero-valid (its `zeroed` is the crate's checked one).
unsafe impl LowerInterface for RDMA_INTERFACE_VERBS {
    const GUID: wv_ci::GUID = GUID_RDMA_INTERFACE_VERBS;
    const VERSION: u16 = RDMA_INTERFACE_VERBS_VERSION;
    fn zeroed() -> Self {
        RDMA_INTERFACE_VERBS::zeroed()
    }
}

// SAFETY: as for the verbs interface.
unsafe impl LowerInterface for INFINIBAND_INTERFACE_CM {
    const GUID: wv_ci::GUID = GUID_INFINIBAND_INTERFACE_CM;
    const VERSION: u16 = INFINIBAND_INTERFACE_CM_VERSION;
    fn zeroed() -> Self {
        INFINIBAND_INTERFACE_CM::zeroed()
    }
}

impl Device {
    /// The device behind `handle`.
    ///
    /// # Safety
    /// `handle` is a device this driver created, live for as long as the value (and its
    /// copies) are used: one the framework passed to the running callback, or one this driver
    /// has not deleted.
    pub unsafe fn from_raw(handle: WDFDEVICE) -> Device {
        Device(handle)
    }

    /// The framework handle.
    pub fn raw(self) -> WDFDEVICE {
        self.0
    }

    /// `WdfFdoQueryForInterface` (PASSIVE_LEVEL, a filter device): asks the stack below for
    /// `T`. On success the provider has taken one reference for the caller, who must release
    /// it with the interface's `InterfaceDereference` (the wv-ci adapters do when they drop).
    ///
    /// # Errors
    /// The provider's status, `STATUS_NOT_SUPPORTED` when nobody below answers.
    pub fn query_interface<T: LowerInterface>(self) -> Result<T, NTSTATUS> {
        let mut interface = T::zeroed();
        let guid = GUID {
            Data1: T::GUID.Data1,
            Data2: T::GUID.Data2,
            Data3: T::GUID.Data3,
            Data4: T::GUID.Data4,
        };
        let size = const {
            assert!(size_of::<T>() <= u16::MAX as usize);
            size_of::<T>() as u16
        };
        // SAFETY: a live filter device at PASSIVE_LEVEL; `interface` is writable, `size` bytes
        // long and begins with an INTERFACE header (the `LowerInterface` contract); `guid`
        // outlives the call; no interface-specific data.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfFdoQueryForInterface,
                self.0,
                &guid,
                (&raw mut interface).cast::<INTERFACE>(),
                size,
                T::VERSION,
                null_mut(),
            )
        };
        if nt_success(status) {
            Ok(interface)
        } else {
            Err(status)
        }
    }

    /// `WdfDeviceWdmGetDeviceObject`: the WDM device object. IRQL <= DISPATCH_LEVEL.
    pub fn wdm_device_object(self) -> PDEVICE_OBJECT {
        // SAFETY: a live device.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceWdmGetDeviceObject, self.0) }
    }

    /// `WdfDeviceCreateSymbolicLink` (PASSIVE_LEVEL); the framework copies `name` and deletes
    /// the link with the device.
    pub fn create_symbolic_link(self, name: &UNICODE_STRING) -> NTSTATUS {
        // SAFETY: a live device at PASSIVE_LEVEL; `name` outlives the call.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, self.0, name) }
    }

    /// `WdfControlFinishInitializing` (PASSIVE_LEVEL, a control device): from here opens reach
    /// it.
    pub fn finish_control_initializing(self) {
        // SAFETY: a live control device at PASSIVE_LEVEL, fully set up by the caller.
        unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, self.0) };
    }

    /// `WdfDeviceEnqueueRequest` (IRQL <= DISPATCH_LEVEL, from `EvtIoInCallerContext`): hands
    /// `request` to the device's queues, which own it from then on.
    ///
    /// # Errors
    /// The framework's status, with the request, which the caller still owns and completes.
    pub fn enqueue(self, request: OwnedRequest) -> Result<(), (OwnedRequest, NTSTATUS)> {
        // SAFETY: a live device and a request it received, owned by the caller.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(WdfDeviceEnqueueRequest, self.0, request.raw())
        };
        if nt_success(status) {
            let _ = request.into_raw();
            Ok(())
        } else {
            Err((request, status))
        }
    }

    /// `WdfObjectDelete` of the device (PASSIVE_LEVEL, outside its own callbacks).
    ///
    /// # Safety
    /// A device this driver created and may delete (a control device, or a filter device that
    /// failed before it was used), deleted once; no copy of the value is used afterwards.
    pub unsafe fn delete(self) {
        // SAFETY: the caller's promise.
        unsafe { object::delete(self.0.cast()) };
    }
}
